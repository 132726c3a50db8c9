//! `ember bench quotas`: what the quota checks add to a stack create — the
//! limits read, the project's stacks and running operations counted — on
//! the embedded SQLite with a project holding `stacks` stacks.

use std::sync::Arc;
use std::time::Instant;

use ember_engine::domain::quota::QuotaLimits;
use ember_engine::domain::{ActionStatus, Event, Stack, StackDefinition};
use ember_engine::quotas::Quotas;
use ember_engine::store::quotas::SqlQuotaStore;
use ember_engine::store::{
    LeaseRequest, NewStack, SqlStackStore, StackStore, migrations::Migrator,
};

pub async fn run(stacks: usize, checks: usize) -> Result<(), String> {
    let data_dir = tempfile::tempdir().map_err(|error| error.to_string())?;
    let url = ember_runtime::database::sqlite_url(&data_dir.path().join("engine.db"));
    let connection = ember_runtime::database::connect_and_migrate::<Migrator>(&url)
        .await
        .map_err(|error| error.to_string())?;
    let reader = ember_runtime::database::connect_reader(&url, &connection)
        .await
        .map_err(|error| error.to_string())?;
    let stack_store = SqlStackStore::new(connection.clone());
    let now = ember_runtime::time::now();
    let engine_id = uuid::Uuid::now_v7();
    for index in 0..stacks {
        let name = format!("stack-{index}");
        let stack = Stack {
            status: ActionStatus::Complete,
            status_reason: String::new(),
            ..Stack::starting_create(uuid::Uuid::new_v4(), &name, "demo", "demo", now)
        };
        // Recorded as a create does: under the stack's lease, then released.
        let event = Event::for_stack(&stack, "Stack CREATE completed", now);
        let fence = stack_store
            .create_stack_with_lease(&NewStack {
                stack,
                definition: StackDefinition::default(),
                resources: Vec::new(),
                event,
                lease: LeaseRequest::new(
                    engine_id,
                    "CREATE",
                    now,
                    now + chrono::Duration::seconds(60),
                ),
            })
            .await
            .map_err(|error| error.to_string())?;
        stack_store
            .release_stack_lease(fence)
            .await
            .map_err(|error| error.to_string())?;
    }
    let quotas = Quotas::new(
        Arc::new(SqlQuotaStore::new(connection, reader)),
        QuotaLimits::default(),
    );
    let mut samples = Vec::with_capacity(checks);
    for _ in 0..checks {
        let started = Instant::now();
        quotas
            .admit_stack_create("demo", 10)
            .await
            .map_err(|error| error.to_string())?;
        samples.push(started.elapsed());
    }
    samples.sort();
    let at = |fraction: f64| {
        samples[((samples.len() - 1) as f64 * fraction).round() as usize].as_secs_f64() * 1e6
    };
    println!(
        "quota checks of one stack create (resources per stack, stacks, concurrent operations), {stacks} stacks in the project, SQLite, {checks} runs"
    );
    println!("median {:.1} µs, p99 {:.1} µs", at(0.5), at(0.99));
    Ok(())
}
