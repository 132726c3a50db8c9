//! The wait condition signal store on SQLite and PostgreSQL: signals
//! without an id are numbered, a signal with an id already there replaces
//! it, and many signals racing from two replicas (two pools) are each kept
//! under a number of their own.

use ember_engine::domain::wait_condition::{SignalInput, SignalStatus};
use ember_engine::store::migrations::Migrator;
use ember_engine::store::signals::{SqlWaitSignalStore, WaitSignalStore};
use ember_runtime::database::connect_and_migrate;
use ember_runtime::database::testing::TestDatabase;
use serde_json::json;
use uuid::Uuid;

async fn store(database: &TestDatabase) -> SqlWaitSignalStore {
    let connection = connect_and_migrate::<Migrator>(&database.url)
        .await
        .expect("migrated");
    SqlWaitSignalStore::new(connection.clone(), connection)
}

fn unnamed(data: &str) -> SignalInput {
    SignalInput {
        unique_id: None,
        status: SignalStatus::Success,
        reason: None,
        data: json!(data),
    }
}

async fn signals_are_numbered_and_replaced_by_id(database: &TestDatabase) {
    let store = store(database).await;
    let stack = Uuid::new_v4();
    let first = store
        .record_wait_signal(stack, "h", &unnamed("a"))
        .await
        .expect("stored");
    assert_eq!(first.unique_id, "1");
    assert_eq!(first.reason, "Signal 1 received");
    let named = SignalInput {
        unique_id: Some("vm".to_owned()),
        status: SignalStatus::Failure,
        reason: Some("disk full".to_owned()),
        data: json!(null),
    };
    store
        .record_wait_signal(stack, "h", &named)
        .await
        .expect("stored");
    let replaced = SignalInput {
        status: SignalStatus::Success,
        reason: Some("fixed".to_owned()),
        ..named
    };
    store
        .record_wait_signal(stack, "h", &replaced)
        .await
        .expect("stored");
    let signals = store.list_wait_signals(stack, "h").await.expect("listed");
    assert_eq!(signals.len(), 2, "{signals:?}");
    assert_eq!(signals[1].unique_id, "vm");
    assert_eq!(signals[1].status, SignalStatus::Success);
    assert_eq!(signals[1].reason, "fixed");
    // Other handles and stacks are apart; clearing clears one handle.
    assert!(
        store
            .list_wait_signals(stack, "other")
            .await
            .expect("listed")
            .is_empty()
    );
    assert!(
        store
            .list_wait_signals(Uuid::new_v4(), "h")
            .await
            .expect("listed")
            .is_empty()
    );
    store.clear_wait_signals(stack, "h").await.expect("cleared");
    assert!(
        store
            .list_wait_signals(stack, "h")
            .await
            .expect("listed")
            .is_empty()
    );
}

async fn racing_signals_from_two_replicas_are_each_kept(database: &TestDatabase) {
    let one = std::sync::Arc::new(store(database).await);
    let two = std::sync::Arc::new(store(database).await);
    let stack = Uuid::new_v4();
    let sends = (0..40).map(|index| {
        let store = if index % 2 == 0 {
            one.clone()
        } else {
            two.clone()
        };
        tokio::spawn(async move {
            store
                .record_wait_signal(stack, "h", &unnamed(&index.to_string()))
                .await
                .expect("stored")
        })
    });
    let stored = futures::future::join_all(sends).await;
    let mut ids: Vec<String> = stored
        .into_iter()
        .map(|signal| signal.expect("task").unique_id)
        .collect();
    ids.sort_by_key(|id| id.parse::<u32>().unwrap_or(0));
    let expected: Vec<String> = (1..=40).map(|number| number.to_string()).collect();
    assert_eq!(ids, expected, "each signal its own number");
    assert_eq!(
        one.list_wait_signals(stack, "h")
            .await
            .expect("listed")
            .len(),
        40
    );
}

ember_runtime::store_suite!(
    signals_are_numbered_and_replaced_by_id,
    racing_signals_from_two_replicas_are_each_kept,
);
