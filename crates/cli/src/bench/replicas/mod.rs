//! `ember bench replicas`: stack create+delete throughput through two engine
//! replicas sharing one PostgreSQL database, against one. N keep-alive REST
//! clients each create a stack of `OS::Heat::None` resources through the
//! gateway, wait for CREATE_COMPLETE, delete it and wait for
//! DELETE_COMPLETE, over and over for a fixed time; the same clients,
//! template and gateway run against one engine and against two, each
//! engine count on a fresh schema of the same server, alternating for
//! `--rounds` rounds so drift on a noisy machine hits both.
//!
//! The replicas share work as in a deployment: the gateway spreads calls
//! over them with the balancer of `ember_runtime::channel`, and each replica
//! runs the operations it was called for under a stack lease in the shared
//! database. In a deployment the engine URL names a host that resolves to
//! one address per replica; here the replicas listen on loopback ports of
//! this process, and the gateway's engine channel is that same balancer
//! given a name lookup that answers those ports (`balanced_with`, as the
//! runtime's own tests stand in for DNS). That channel is the only part of
//! the gateway assembled here; its router, authentication and REST
//! translation, and the engines, are what `ember serve` runs.
//!
//! Which engine ran each create is read from the stack's lease row (the id
//! of the engine that took it) once the stack is CREATE_COMPLETE, before
//! the delete takes the lease over; which ran each delete from the rows
//! left at the end. Each window also prints where the machine's CPU went
//! (this process against the rest, PostgreSQL included) and median
//! latencies, so a ratio bounded by CPU is told apart from one bounded by
//! waiting inside an engine.

use std::collections::BTreeMap;
use std::time::Duration;

use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use self::cpu::{CpuSample, CpuShare};
use self::deployment::{start, stop};
use self::load::{Latencies, Load, none_template};
use super::stacks::EngineSchema;
use super::summarize;
use crate::dev::DevCredentials;

mod cpu;
mod deployment;
mod load;

/// The environment variable the tests name their PostgreSQL server with
/// (`ember_runtime::database::testing`, which release builds leave out).
const TEST_DATABASE_URL_ENV: &str = "EMBER_TEST_DATABASE_URL";

/// The PostgreSQL server used when neither `--database-url` nor
/// `EMBER_TEST_DATABASE_URL` names one.
pub const DEFAULT_DATABASE_URL: &str = "postgres://postgres@127.0.0.1:5432/postgres";

pub struct ReplicasBench {
    pub clients: usize,
    pub duration: Duration,
    pub warm_up: Duration,
    pub resources: usize,
    pub poll: Duration,
    pub rounds: usize,
    /// None: `EMBER_TEST_DATABASE_URL`, else [`DEFAULT_DATABASE_URL`].
    pub database_url: Option<String>,
}

/// What one measured window of one engine count gave.
struct Measured {
    engines: usize,
    stacks: usize,
    elapsed: Duration,
    /// Creates per engine id, from the lease rows.
    creates: BTreeMap<String, usize>,
    /// Deletes per engine id, from the lease rows left at the end.
    deletes: BTreeMap<String, usize>,
    /// Where the machine's CPU went during the window, when it can tell.
    cpu: Option<CpuShare>,
    latencies: Latencies,
}

impl Measured {
    fn per_second(&self) -> f64 {
        self.stacks as f64 / self.elapsed.as_secs_f64()
    }

    /// CPU-seconds this process (clients, gateway, engines) and the rest
    /// (PostgreSQL's server, anything else running) spent in the window.
    fn cpu_seconds(&self) -> Option<(f64, f64)> {
        let seconds = self.elapsed.as_secs_f64();
        self.cpu
            .as_ref()
            .map(|cpu| (cpu.this_process_cores * seconds, cpu.other_cores * seconds))
    }
}

/// Stacks per CPU-second of Ember's process and of the rest, over every
/// window of `engines` engines that could tell its CPU.
fn per_cpu_second(results: &[Measured], engines: usize) -> Option<(f64, f64)> {
    let (stacks, ember, other) = results
        .iter()
        .filter(|measured| measured.engines == engines)
        .filter_map(|measured| {
            measured
                .cpu_seconds()
                .map(|(ember, other)| (measured.stacks, ember, other))
        })
        .fold((0usize, 0f64, 0f64), |(stacks, ember, other), (s, e, o)| {
            (stacks + s, ember + e, other + o)
        });
    (ember > 0.0 && other > 0.0).then(|| (stacks as f64 / ember, stacks as f64 / other))
}

pub async fn run(bench: ReplicasBench) -> Result<(), String> {
    let database_url = bench.database_url.clone().unwrap_or_else(|| {
        std::env::var(TEST_DATABASE_URL_ENV).unwrap_or_else(|_| DEFAULT_DATABASE_URL.to_owned())
    });
    let cores = std::thread::available_parallelism().map_or(0, |cores| cores.get());
    println!(
        "stack create+delete through 1 and 2 engine replicas sharing one PostgreSQL \
         ({}), gateway REST",
        ember_runtime::database::redact(&database_url)
    );
    println!(
        "{} keep-alive clients, stacks of {} OS::Heat::None, polled every {} ms; \
         {:.0} s warm-up then {:.0} s measured per engine count; {} round(s)",
        bench.clients,
        bench.resources,
        bench.poll.as_millis(),
        bench.warm_up.as_secs_f64(),
        bench.duration.as_secs_f64(),
        bench.rounds
    );
    println!(
        "{cores} CPU cores: clients, gateway, every engine and the PostgreSQL server share them, \
         so with few cores the ratio is bounded by CPU, not by how the replicas share work"
    );
    println!(
        "CPU busy: the whole machine over the measured window; Ember: cores this process used \
         (clients, gateway, engines); other: the rest (PostgreSQL, anything else running)"
    );
    println!(
        "medians in ms: create = POST to CREATE_COMPLETE seen (polling granularity included), \
         POST = the create call's answer, GET = one status poll"
    );
    println!(
        "{:<6} {:<8} {:>7} {:>9} {:>9} {:>6} {:>6} {:>8} {:>8} {:>8}  creates by engine (lease rows) / deletes by engine",
        "round",
        "engines",
        "stacks",
        "stacks/s",
        "CPU busy",
        "Ember",
        "other",
        "create",
        "POST",
        "GET"
    );
    let mut results: Vec<Measured> = Vec::new();
    for round in 1..=bench.rounds {
        for engines in [1, 2] {
            let measured = measure(engines, &database_url, &bench).await?;
            let (busy, ember, other) = measured.cpu.map_or_else(
                || ("?".to_owned(), "?".to_owned(), "?".to_owned()),
                |cpu| {
                    (
                        format!("{:.0}%", cpu.busy * 100.0),
                        format!("{:.2}", cpu.this_process_cores),
                        format!("{:.2}", cpu.other_cores),
                    )
                },
            );
            let median_ms = |samples: &mut Vec<Duration>| summarize(samples).median_us / 1e3;
            let mut latencies = measured.latencies.clone();
            println!(
                "{:<6} {:<8} {:>7} {:>9.1} {:>9} {:>6} {:>6} {:>8.1} {:>8.2} {:>8.2}  {} / {}",
                round,
                engines,
                measured.stacks,
                measured.per_second(),
                busy,
                ember,
                other,
                median_ms(&mut latencies.create),
                median_ms(&mut latencies.post),
                median_ms(&mut latencies.get),
                spread(&measured.creates),
                spread(&measured.deletes)
            );
            results.push(measured);
        }
    }
    let rate = |engines: usize| {
        let (stacks, seconds) = results
            .iter()
            .filter(|measured| measured.engines == engines)
            .fold((0usize, 0f64), |(stacks, seconds), measured| {
                (
                    stacks + measured.stacks,
                    seconds + measured.elapsed.as_secs_f64(),
                )
            });
        stacks as f64 / seconds.max(f64::EPSILON)
    };
    let (one, two) = (rate(1), rate(2));
    println!("1 engine:  {one:.1} stacks/s (all rounds)");
    println!("2 engines: {two:.1} stacks/s (all rounds)");
    println!(
        "ratio 2/1: {:.2}× (target ≥ 1.6×)",
        two / one.max(f64::EPSILON)
    );
    // What a replica costs, apart from how many cores the machine has:
    // stacks per CPU-second of Ember (clients and gateway included, the
    // same for both counts) and, beside it, of the database's side.
    match (per_cpu_second(&results, 1), per_cpu_second(&results, 2)) {
        (Some((one_ember, one_other)), Some((two_ember, two_other))) => {
            println!(
                "stacks per CPU-second of Ember: 1 engine {one_ember:.1}, 2 engines {two_ember:.1}, \
                 ratio {:.2}× (target ≥ 0.9×)",
                two_ember / one_ember.max(f64::EPSILON)
            );
            println!(
                "stacks per CPU-second of the rest (PostgreSQL's server): 1 engine {one_other:.1}, \
                 2 engines {two_other:.1}, ratio {:.2}×",
                two_other / one_other.max(f64::EPSILON)
            );
        }
        _ => println!("stacks per CPU-second: this machine does not tell (no /proc)"),
    }
    Ok(())
}

/// `…engine: count (share%)` per engine, largest first.
fn spread(counts: &BTreeMap<String, usize>) -> String {
    let total: usize = counts.values().sum();
    let mut counts: Vec<(&String, &usize)> = counts.iter().collect();
    counts.sort_by(|left, right| right.1.cmp(left.1));
    let parts: Vec<String> = counts
        .iter()
        .map(|(engine, count)| {
            // The random tail of the engine's id (its head is a timestamp,
            // the same for engines started together).
            format!(
                "…{}: {count} ({:.0}%)",
                engine
                    .get(engine.len().saturating_sub(8)..)
                    .unwrap_or(engine),
                **count as f64 * 100.0 / total.max(1) as f64
            )
        })
        .collect();
    if parts.is_empty() {
        "none".to_owned()
    } else {
        parts.join(", ")
    }
}

/// One engine count: a fresh deployment and schema, a warm-up, the
/// measured window, and the spread read from the lease rows.
async fn measure(
    engines: usize,
    database_url: &str,
    bench: &ReplicasBench,
) -> Result<Measured, String> {
    let data_dir = tempfile::tempdir().map_err(|error| error.to_string())?;
    let (mut config, secrets) = crate::dev::ephemeral_config(data_dir.path());
    let schema = EngineSchema::use_postgres(&mut config, Some(database_url)).await?;
    let schema_url = config.engine.database_url.clone();
    let shutdown = CancellationToken::new();
    let mut tasks = JoinSet::new();
    let result = async {
        let gateway_addr = start(engines, config, &secrets, &shutdown, &mut tasks).await?;
        let credentials = DevCredentials::mint(gateway_addr, &secrets, Duration::from_secs(3600))?;
        let database = ember_runtime::database::connect(&schema_url)
            .await
            .map_err(|error| format!("the engines' database: {error}"))?;
        let load = Load {
            gateway: format!("http://{gateway_addr}"),
            token: credentials.member.token.clone(),
            project: credentials.member.project_id.clone(),
            template: none_template(bench.resources),
            poll: bench.poll,
            database,
        };
        load.run("warm", bench.clients, bench.warm_up).await?;
        let before = CpuSample::take();
        let window = load.run("bench", bench.clients, bench.duration).await?;
        let cpu = before
            .zip(CpuSample::take())
            .map(|(before, after)| after.since(&before));
        let deletes = load.deletes_by_engine().await?;
        Ok::<_, String>(Measured {
            engines,
            stacks: window.stacks,
            elapsed: window.elapsed,
            creates: window.creates,
            deletes,
            cpu,
            latencies: window.latencies,
        })
    }
    .await;
    let stopped = stop(shutdown, tasks).await;
    schema.drop().await;
    let measured = result?;
    stopped?;
    Ok(measured)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stacks_per_cpu_second_add_up_every_window_of_an_engine_count() {
        let window = |engines, stacks, ember, other| Measured {
            engines,
            stacks,
            elapsed: Duration::from_secs(10),
            creates: BTreeMap::new(),
            deletes: BTreeMap::new(),
            cpu: Some(CpuShare {
                busy: 1.0,
                this_process_cores: ember,
                other_cores: other,
            }),
            latencies: Latencies::default(),
        };
        let results = [
            window(1, 100, 1.0, 0.5),
            window(2, 90, 1.0, 0.5),
            window(1, 300, 1.0, 0.5),
        ];
        // 400 stacks over 20 Ember CPU-seconds and 10 of the rest.
        assert_eq!(per_cpu_second(&results, 1), Some((20.0, 40.0)));
        assert_eq!(per_cpu_second(&results, 2), Some((9.0, 18.0)));
        assert_eq!(per_cpu_second(&results, 3), None);
    }

    #[test]
    fn spread_names_each_engine_by_its_random_tail_largest_first() {
        let counts = BTreeMap::from([
            ("019ac0de-0000-7000-8000-0000000000aa".to_owned(), 1),
            ("019ac0de-0000-7000-8000-0000000000bb".to_owned(), 3),
        ]);
        assert_eq!(spread(&counts), "…000000bb: 3 (75%), …000000aa: 1 (25%)");
        assert_eq!(spread(&BTreeMap::new()), "none");
    }
}
