//! Readiness that tells the truth. A service is not ready just because its
//! port answers: a starved database pool or a saturated work queue means
//! its callers wait for seconds, and a probe must say so. Every service
//! registers its checks (its database pools, its queues); a monitor runs
//! them every [`CHECK_INTERVAL`], keeps the last report, and drives the
//! service's `grpc.health.v1` status: SERVING only while every check
//! passes (and the service is not shutting down). The report — each
//! check's finding in words, and the figures behind it as gauges — is
//! served by `ember.readiness.v1.ReadinessService`, which the gateway reads
//! for `/healthz` and `/metrics`; a report older than [`FRESH_FOR`] is
//! refreshed when it is asked for (and the health status follows that
//! round too), so whoever asks sees the truth of the last second while
//! nobody asking costs a round every few seconds.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use ember_proto::readiness::v1 as pb;
use sea_orm::{ConnectionTrait, DatabaseConnection};

/// How often the checks run on their own (driving `grpc.health.v1`).
pub const CHECK_INTERVAL: Duration = Duration::from_secs(5);

/// A report asked for is refreshed first when it is older than this.
pub const FRESH_FOR: Duration = Duration::from_secs(1);

/// How long an asker waits for that refresh before it is answered from the
/// last report (a starved pool's probe takes [`DATABASE_STARVED_AFTER`];
/// the refresh goes on, and its findings answer the next ask).
pub const ASK_WAITS_AT_MOST: Duration = Duration::from_secs(1);

/// A database whose pool gives no connection within this long is starved:
/// callers wait at least that long for any query. (The probe's own wait is
/// cut there, so a stuck pool is reported after this long, not after the
/// pool's acquire timeout.)
pub const DATABASE_STARVED_AFTER: Duration = Duration::from_secs(5);

/// What one check found.
#[derive(Debug, Clone, PartialEq)]
pub struct Finding {
    pub healthy: bool,
    pub detail: String,
    pub gauges: Vec<Gauge>,
}

/// One figure for Prometheus.
#[derive(Debug, Clone, PartialEq)]
pub struct Gauge {
    pub name: &'static str,
    pub help: &'static str,
    pub labels: Vec<(&'static str, String)>,
    pub value: f64,
}

type CheckFuture = Pin<Box<dyn Future<Output = Finding> + Send>>;

/// A named check, run by the monitor.
#[derive(Clone)]
pub struct Check {
    name: String,
    run: Arc<dyn Fn() -> CheckFuture + Send + Sync>,
}

impl std::fmt::Debug for Check {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Check").field("name", &self.name).finish()
    }
}

impl Check {
    pub fn new<F, Fut>(name: impl Into<String>, run: F) -> Check
    where
        F: Fn() -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Finding> + Send + 'static,
    {
        Check {
            name: name.into(),
            run: Arc::new(move || Box::pin(run())),
        }
    }

    /// A connection of `pool` answers `SELECT 1` within `starved_after`.
    /// `pool` names it in the report (`writer`, `reader`).
    pub fn database(
        pool: &'static str,
        connection: impl Into<crate::reader::Reader>,
        starved_after: Duration,
    ) -> Check {
        let connection: crate::reader::Reader = connection.into();
        Check::new(format!("database ({pool})"), move || {
            let connection = connection.clone();
            async move { probe_database(pool, &connection, starved_after).await }
        })
    }

    /// A work queue whose depth `depth` reads; unhealthy from `saturated_at`
    /// items on. `depth` failing (its own database is down) is unhealthy.
    pub fn queue<F, Fut>(name: &'static str, saturated_at: u64, depth: F) -> Check
    where
        F: Fn() -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<u64, String>> + Send + 'static,
    {
        let depth = Arc::new(depth);
        Check::new(format!("queue {name}"), move || {
            let depth = depth.clone();
            async move { queue_finding(name, saturated_at, depth().await) }
        })
    }
}

async fn probe_database(
    pool: &'static str,
    connection: &crate::reader::Reader,
    starved_after: Duration,
) -> Finding {
    // The pool as the service's own work left it, before the probe takes
    // a connection.
    let (connections, idle) = connection.pool_size();
    let started = Instant::now();
    let answer =
        tokio::time::timeout(starved_after, connection.execute_unprepared("SELECT 1")).await;
    let waited = started.elapsed();
    let mut gauges = vec![Gauge {
        name: "ember_database_probe_seconds",
        help: "how long the last probe waited for a connection and its SELECT 1",
        labels: vec![("pool", pool.to_owned())],
        value: waited.as_secs_f64(),
    }];
    if let (Some(connections), Some(idle)) = (connections, idle) {
        gauges.push(Gauge {
            name: "ember_database_connections",
            help: "connections the pool holds",
            labels: vec![("pool", pool.to_owned()), ("state", "idle".to_owned())],
            value: idle as f64,
        });
        gauges.push(Gauge {
            name: "ember_database_connections",
            help: "connections the pool holds",
            labels: vec![("pool", pool.to_owned()), ("state", "busy".to_owned())],
            value: (connections as usize).saturating_sub(idle) as f64,
        });
    }
    let (healthy, mut detail) = match answer {
        Ok(Ok(_)) => (
            true,
            format!("a connection answered in {:.1} ms", millis(waited)),
        ),
        Ok(Err(error)) => (false, format!("the database refused the probe: {error}")),
        Err(_) => (
            false,
            format!(
                "waited more than {} s for a database connection: the pool is starved",
                starved_after.as_secs_f64()
            ),
        ),
    };
    // A pool that cannot connect says only that it timed out: the cause is
    // found by connecting once without it.
    if !healthy && let Some(cause) = connection.connect_failure().await {
        detail = format!("{detail}; the pool cannot connect: {cause}");
    }
    Finding {
        healthy,
        detail,
        gauges,
    }
}

/// Connections in the pool and how many are idle, when the backend says.
pub(crate) fn pool_size(connection: &DatabaseConnection) -> (Option<u32>, Option<usize>) {
    match connection.get_database_backend() {
        sea_orm::DatabaseBackend::Sqlite => {
            let pool = connection.get_sqlite_connection_pool();
            (Some(pool.size()), Some(pool.num_idle()))
        }
        sea_orm::DatabaseBackend::Postgres => {
            let pool = connection.get_postgres_connection_pool();
            (Some(pool.size()), Some(pool.num_idle()))
        }
        _ => (None, None),
    }
}

fn queue_finding(name: &'static str, saturated_at: u64, depth: Result<u64, String>) -> Finding {
    match depth {
        Ok(depth) => Finding {
            healthy: depth < saturated_at,
            detail: if depth < saturated_at {
                format!("{depth} waiting")
            } else {
                format!("{depth} waiting, saturated from {saturated_at} on")
            },
            gauges: vec![Gauge {
                name: "ember_work_queue_depth",
                help: "items waiting in a work queue",
                labels: vec![("queue", name.to_owned())],
                value: depth as f64,
            }],
        },
        Err(error) => Finding {
            healthy: false,
            detail: format!("cannot read the queue's depth: {error}"),
            gauges: Vec::new(),
        },
    }
}

fn millis(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1000.0
}

/// The findings of the last round, and when it ended.
#[derive(Debug, Default)]
struct LastRound {
    findings: Vec<(String, Finding)>,
    /// Tokio's clock, which tests can pause.
    ended: Option<tokio::time::Instant>,
}

/// A service's checks and the last report of them.
#[derive(Clone, Debug)]
pub struct Readiness {
    service: &'static str,
    checks: Vec<Check>,
    last: Arc<RwLock<LastRound>>,
    /// Held by the round under way: an ask while one runs waits for it
    /// rather than starting another.
    round: Arc<tokio::sync::Mutex<()>>,
    /// Whether the last round, whoever ran it, found every check healthy
    /// (`None` before the first): what the service's health follows.
    ready: Arc<tokio::sync::watch::Sender<Option<bool>>>,
}

impl Readiness {
    pub fn new(service: &'static str) -> Readiness {
        Readiness {
            service,
            checks: Vec::new(),
            last: Arc::default(),
            round: Arc::default(),
            ready: Arc::new(tokio::sync::watch::Sender::new(None)),
        }
    }

    pub fn with(mut self, check: Check) -> Readiness {
        self.checks.push(check);
        self
    }

    /// Runs every check once (concurrently, each bounded by its own
    /// timeout) and keeps the findings. True when all are healthy.
    pub async fn refresh(&self) -> bool {
        let _round = self.round.lock().await;
        self.run_round().await
    }

    /// Changes of whether the last round found every check healthy, be it
    /// a round of [`refresh`](Self::refresh) or one an ask ran.
    pub fn watch_ready(&self) -> tokio::sync::watch::Receiver<Option<bool>> {
        self.ready.subscribe()
    }

    /// The report as of the last [`FRESH_FOR`]: when the last round is
    /// older, one is run first (or the one under way awaited), for at most
    /// [`ASK_WAITS_AT_MOST`].
    pub async fn fresh_report(&self) -> pb::ReadinessReport {
        if !self.is_fresh() {
            let readiness = self.clone();
            let round = tokio::spawn(async move {
                let _round = readiness.round.lock().await;
                // The round awaited may have been someone else's.
                if !readiness.is_fresh() {
                    readiness.run_round().await;
                }
            });
            // Past the wait the round goes on, for the next ask.
            let _ = tokio::time::timeout(ASK_WAITS_AT_MOST, round).await;
        }
        self.report()
    }

    fn is_fresh(&self) -> bool {
        self.last
            .read()
            .ok()
            .and_then(|last| last.ended)
            .is_some_and(|ended| ended.elapsed() < FRESH_FOR)
    }

    async fn run_round(&self) -> bool {
        let findings = futures_join_all(
            self.checks
                .iter()
                .map(|check| {
                    let run = check.run.clone();
                    let name = check.name.clone();
                    async move { (name, run().await) }
                })
                .collect(),
        )
        .await;
        let ready = findings.iter().all(|(_, finding)| finding.healthy);
        for (name, finding) in &findings {
            if !finding.healthy {
                tracing::warn!(service = self.service, check = %name, detail = %finding.detail, "not ready");
            }
        }
        if let Ok(mut last) = self.last.write() {
            *last = LastRound {
                findings,
                ended: Some(tokio::time::Instant::now()),
            };
        }
        self.ready
            .send_if_modified(|last| last.replace(ready) != Some(ready));
        ready
    }

    /// The last findings, as the readiness service answers them.
    pub fn report(&self) -> pb::ReadinessReport {
        let last = self
            .last
            .read()
            .map(|last| last.findings.clone())
            .unwrap_or_default();
        pb::ReadinessReport {
            service: self.service.to_owned(),
            ready: last.iter().all(|(_, finding)| finding.healthy),
            checks: last
                .iter()
                .map(|(name, finding)| pb::ReadinessCheck {
                    name: name.clone(),
                    healthy: finding.healthy,
                    detail: finding.detail.clone(),
                })
                .collect(),
            gauges: last
                .iter()
                .flat_map(|(_, finding)| finding.gauges.iter())
                .map(|gauge| pb::Gauge {
                    name: gauge.name.to_owned(),
                    help: gauge.help.to_owned(),
                    labels: gauge
                        .labels
                        .iter()
                        .map(|(key, value)| ((*key).to_owned(), value.clone()))
                        .collect::<HashMap<_, _>>(),
                    value: gauge.value,
                })
                .collect(),
        }
    }
}

/// `join_all` without a dependency on `futures` in this crate.
async fn futures_join_all<T: Send + 'static>(
    futures: Vec<impl Future<Output = T> + Send + 'static>,
) -> Vec<T> {
    let handles: Vec<_> = futures.into_iter().map(tokio::spawn).collect();
    let mut results = Vec::with_capacity(handles.len());
    for handle in handles {
        if let Ok(result) = handle.await {
            results.push(result);
        }
    }
    results
}

/// `ember.readiness.v1.ReadinessService`, answering with the report of the
/// last second (see [`Readiness::fresh_report`]).
#[derive(Clone, Debug)]
pub struct ReadinessHandler(pub Readiness);

#[tonic::async_trait]
impl pb::readiness_service_server::ReadinessService for ReadinessHandler {
    async fn get_readiness(
        &self,
        _request: tonic::Request<pb::GetReadinessRequest>,
    ) -> Result<tonic::Response<pb::ReadinessReport>, tonic::Status> {
        Ok(tonic::Response::new(self.0.fresh_report().await))
    }
}

/// Renders gauges in Prometheus' text format, each with a `service` label;
/// one HELP/TYPE header per metric name.
pub fn render_gauges(reports: &[pb::ReadinessReport]) -> String {
    use std::fmt::Write;
    let mut by_name: Vec<(&str, &str, Vec<String>)> = Vec::new();
    for report in reports {
        for gauge in &report.gauges {
            let mut labels: Vec<(&String, &String)> = gauge.labels.iter().collect();
            labels.sort();
            let mut rendered = format!("service=\"{}\"", escape_label(&report.service));
            for (key, value) in labels {
                // Writing to a String cannot fail.
                let _ = write!(rendered, ",{key}=\"{}\"", escape_label(value));
            }
            let line = format!("{}{{{rendered}}} {}", gauge.name, gauge.value);
            match by_name.iter_mut().find(|(name, _, _)| *name == gauge.name) {
                Some((_, _, lines)) => lines.push(line),
                None => by_name.push((&gauge.name, &gauge.help, vec![line])),
            }
        }
    }
    let mut text = String::new();
    for (name, help, lines) in by_name {
        let _ = writeln!(text, "# HELP {name} {help}\n# TYPE {name} gauge");
        for line in lines {
            let _ = writeln!(text, "{line}");
        }
    }
    text
}

fn escape_label(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

#[cfg(test)]
mod tests {
    use sea_orm::TransactionTrait;

    use super::*;

    async fn single_connection_database() -> DatabaseConnection {
        let mut options = sea_orm::ConnectOptions::new("sqlite::memory:");
        options
            .max_connections(1)
            .min_connections(1)
            .sqlx_logging(false);
        sea_orm::Database::connect(options)
            .await
            .expect("in-memory SQLite")
    }

    /// How many of the pool's connections the report counts as busy.
    fn busy_connections(report: &pb::ReadinessReport) -> f64 {
        report
            .gauges
            .iter()
            .find(|gauge| gauge.labels.get("state").map(String::as_str) == Some("busy"))
            .expect("busy gauge")
            .value
    }

    #[tokio::test]
    async fn a_database_that_answers_is_ready() {
        let readiness = Readiness::new("engine").with(Check::database(
            "writer",
            single_connection_database().await,
            Duration::from_secs(2),
        ));
        assert!(readiness.refresh().await);
        let report = readiness.report();
        assert!(report.ready);
        assert_eq!(report.checks[0].name, "database (writer)");
        assert!(
            report.checks[0].detail.contains("answered in"),
            "{report:?}"
        );
        let busy = busy_connections(&report);
        // The pool may still be opening its first connection.
        assert!(busy <= 1.0, "{report:?}");
    }

    /// A PostgreSQL pool whose server went away (nothing listens at its
    /// address any more): the probe names the cause the pool's timeout
    /// hides.
    #[tokio::test]
    async fn a_pool_that_cannot_connect_says_why() {
        let dead = {
            let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a port");
            listener.local_addr().expect("its address")
        };
        let mut options =
            sea_orm::ConnectOptions::new(format!("postgres://ember@{dead}/ember?sslmode=disable"));
        options
            .connect_lazy(true)
            .min_connections(0)
            .acquire_timeout(Duration::from_secs(30))
            .sqlx_logging(false);
        let database = sea_orm::Database::connect(options)
            .await
            .expect("a lazy pool");
        let readiness = Readiness::new("engine").with(Check::database(
            "writer",
            database,
            Duration::from_millis(300),
        ));
        assert!(!readiness.refresh().await);
        let detail = &readiness.report().checks[0].detail;
        assert!(detail.contains("the pool cannot connect: "), "{detail}");
        assert!(detail.to_lowercase().contains("refused"), "{detail}");
    }

    #[tokio::test]
    async fn a_pool_whose_connections_are_all_held_is_starved() {
        let database = single_connection_database().await;
        // A transaction holds the pool's only connection.
        let holder = database.begin().await.expect("begin");
        let readiness = Readiness::new("engine").with(Check::database(
            "writer",
            database.clone(),
            Duration::from_millis(150),
        ));
        assert!(!readiness.refresh().await);
        let report = readiness.report();
        assert!(!report.ready);
        assert!(
            report.checks[0].detail.contains("the pool is starved"),
            "{report:?}"
        );
        let busy = busy_connections(&report);
        assert_eq!(busy, 1.0);
        holder.rollback().await.expect("rollback");
        assert!(readiness.refresh().await, "ready again once released");
    }

    /// A check that counts its runs and takes `takes` each.
    fn counted(runs: &Arc<std::sync::atomic::AtomicUsize>, takes: Duration) -> Check {
        let runs = runs.clone();
        Check::queue("counted", 10, move || {
            let runs = runs.clone();
            async move {
                runs.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                tokio::time::sleep(takes).await;
                Ok(0)
            }
        })
    }

    #[tokio::test(start_paused = true)]
    async fn an_ask_is_answered_from_a_round_of_the_last_second() {
        let runs = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let readiness = Readiness::new("engine").with(counted(&runs, Duration::ZERO));
        let ran = || runs.load(std::sync::atomic::Ordering::SeqCst);
        // Never checked: the ask runs the first round.
        let report = readiness.fresh_report().await;
        assert_eq!((ran(), report.checks.len()), (1, 1), "{report:?}");
        // Within the second: the same round answers.
        tokio::time::advance(FRESH_FOR / 2).await;
        readiness.fresh_report().await;
        assert_eq!(ran(), 1);
        // Past it: a new round.
        tokio::time::advance(FRESH_FOR).await;
        readiness.fresh_report().await;
        assert_eq!(ran(), 2);
    }

    #[tokio::test(start_paused = true)]
    async fn the_health_follows_a_round_an_ask_ran() {
        let depth = Arc::new(std::sync::atomic::AtomicU64::new(0));
        let queue = {
            let depth = depth.clone();
            Check::queue("transitions", 10, move || {
                let depth = depth.load(std::sync::atomic::Ordering::SeqCst);
                async move { Ok(depth) }
            })
        };
        let readiness = Readiness::new("engine").with(queue);
        let mut health = readiness.watch_ready();
        assert_eq!(*health.borrow(), None, "nothing found before a round");
        readiness.fresh_report().await;
        assert!(health.has_changed().expect("open"));
        assert_eq!(*health.borrow_and_update(), Some(true));
        // The queue fills; the next ask past the second finds it.
        depth.store(11, std::sync::atomic::Ordering::SeqCst);
        tokio::time::sleep(FRESH_FOR).await;
        let report = readiness.fresh_report().await;
        assert!(!report.checks[0].healthy, "{report:?}");
        assert!(health.has_changed().expect("open"));
        assert_eq!(*health.borrow_and_update(), Some(false));
        // The same finding again is no change.
        tokio::time::sleep(FRESH_FOR).await;
        readiness.fresh_report().await;
        assert!(!health.has_changed().expect("open"));
    }

    #[tokio::test(start_paused = true)]
    async fn a_slow_round_answers_the_next_ask_and_is_not_run_twice() {
        let runs = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let slow = ASK_WAITS_AT_MOST * 5;
        let readiness = Readiness::new("engine").with(counted(&runs, slow));
        let ran = || runs.load(std::sync::atomic::Ordering::SeqCst);
        // The asker is answered after its wait, from no round yet.
        let started = tokio::time::Instant::now();
        let report = readiness.fresh_report().await;
        assert_eq!(started.elapsed(), ASK_WAITS_AT_MOST);
        assert!(report.checks.is_empty(), "{report:?}");
        // Asks while it runs wait for it; none starts another.
        readiness.fresh_report().await;
        readiness.fresh_report().await;
        tokio::time::sleep(slow).await;
        assert_eq!(ran(), 1);
        // The round went on: its findings are the report.
        assert_eq!(readiness.report().checks.len(), 1);
    }

    #[tokio::test]
    async fn a_queue_is_saturated_at_its_limit_and_unreadable_is_unhealthy() {
        let readiness = Readiness::new("lifecycle-hook")
            .with(Check::queue("deliveries", 10, || async { Ok(9) }))
            .with(Check::queue("deadlines", 10, || async { Ok(10) }))
            .with(Check::queue("broken", 10, || async {
                Err("no such table".to_owned())
            }));
        assert!(!readiness.refresh().await);
        let report = readiness.report();
        let health: Vec<(String, bool)> = report
            .checks
            .iter()
            .map(|check| (check.name.clone(), check.healthy))
            .collect();
        assert_eq!(
            health,
            vec![
                ("queue deliveries".to_owned(), true),
                ("queue deadlines".to_owned(), false),
                ("queue broken".to_owned(), false),
            ]
        );
        assert!(report.checks[1].detail.contains("saturated from 10"));
        let text = render_gauges(&[report]);
        assert!(
            text.contains(
                "ember_work_queue_depth{service=\"lifecycle-hook\",queue=\"deadlines\"} 10"
            ),
            "{text}"
        );
        assert_eq!(
            text.matches("# TYPE ember_work_queue_depth gauge").count(),
            1
        );
    }
}
