//! `ember bench memory`: how much memory `ember dev` holds with many stacks
//! stored and idle, and whether it grows while stacks come and go (the
//! targets: at most 200 MB with 10,000 stacks of 10 resources stored and
//! idle, and no growth over a 10-minute create/delete loop).
//!
//! `ember dev` runs as a child process (this executable, a fresh temporary
//! data directory), so the resident set read from `/proc/<pid>/status` —
//! VmRSS now, VmHWM the peak — is Ember's alone and not this client's.
//!
//! - Phase 1 creates `--stacks` stacks of 10 `OS::Heat::None` through Heat's
//!   REST API with `--clients` keep-alive clients, each waiting for
//!   CREATE_COMPLETE (status read every 10 ms, as a script would), with the
//!   RSS printed every 1,000 stacks (every tenth of them when fewer than
//!   10,000). Then Ember is left idle `--settle-seconds` and the RSS, the
//!   peak and the data directory's size on disk are printed.
//! - Phase 2 keeps the clients creating a stack of 10, waiting for it,
//!   deleting it and waiting until it is gone, for `--loop-seconds`, with
//!   the RSS sampled every second. It prints the RSS at the start and end of
//!   the loop, the least and most seen, and the growth per 1,000 cycles two
//!   ways: a linear fit of RSS over cycles, and idle after the loop minus
//!   idle before it. With `--purge-every-seconds`, an admin purges what is
//!   deleted (`MaintenanceService/Purge`, `ember admin purge`, the pass the
//!   engine's retention runs) that often, and the data directory's size is
//!   printed beside the RSS: flat once retention runs.
//!
//! MB are 10^6 bytes. The figures are printed, never judged (a debug build
//! holds far more than a release build).

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use tokio::task::JoinSet;

use super::stacks::client::RestStacks;
use super::stacks::template_of_independent_resources;
use crate::dev::DevCredentials;

/// How often a waiting client reads its stack's status.
const POLL: Duration = Duration::from_millis(10);
/// How often the RSS is sampled (and the child checked) while clients run.
const SAMPLE_EVERY: Duration = Duration::from_secs(1);
/// The RSS is printed every this many stacks created in phase 1.
const PROGRESS_EVERY: usize = 1_000;
/// The longest interval between two lines of phase 2.
const REPORT_EVERY: Duration = Duration::from_secs(60);
/// Resources of every stack.
const RESOURCES: usize = 10;

pub struct MemoryBench {
    pub stacks: usize,
    pub clients: usize,
    pub settle: Duration,
    pub loop_duration: Duration,
    /// How often deleted stacks are purged during the loop (`None`: never).
    pub purge_every: Option<Duration>,
}

/// The age a purge during the loop removes (the least `ember admin purge`
/// takes).
const PURGE_OLDER_THAN: Duration = Duration::from_secs(1);

pub async fn run(bench: MemoryBench) -> Result<(), String> {
    let mut child = DevChild::start(&bench).await?;
    println!(
        "ember bench memory: `ember dev` as a child (pid {}, {} build) on SQLite under {}; \
         {} REST clients, status read every {} ms; MB = 10^6 bytes",
        child.pid,
        if cfg!(debug_assertions) {
            "debug"
        } else {
            "release"
        },
        child.data_dir.path().display(),
        bench.clients,
        POLL.as_millis()
    );
    let result = measure(&mut child, &bench).await;
    let stopped = child.stop().await;
    result.and(stopped)
}

async fn measure(child: &mut DevChild, bench: &MemoryBench) -> Result<(), String> {
    let started = child.memory("starting")?;
    println!(
        "started, no stacks: RSS {:.1} MB",
        megabytes(started.resident_kb)
    );
    fill(child, bench).await?;
    settle(child, bench.settle, "idling with the stacks").await?;
    let idle = child.memory("idling with the stacks")?;
    println!(
        "idle {} s with {} stacks: RSS {:.1} MB, peak (VmHWM) {:.1} MB",
        bench.settle.as_secs(),
        bench.stacks,
        megabytes(idle.resident_kb),
        megabytes(idle.peak_kb)
    );
    println!("  data dir on disk: {}", disk_usage(child.data_dir.path())?);
    churn(child, bench, idle).await
}

/// Phase 1: `bench.stacks` stacks of 10, created by `bench.clients` clients.
async fn fill(child: &mut DevChild, bench: &MemoryBench) -> Result<(), String> {
    let step = PROGRESS_EVERY.min((bench.stacks / 10).max(1));
    println!(
        "phase 1: {} stacks of {RESOURCES} OS::Heat::None, each waited for to CREATE_COMPLETE",
        bench.stacks
    );
    println!(
        "{:>10} {:>10} {:>10} {:>10}",
        "stacks", "seconds", "stacks/s", "RSS MB"
    );
    let template = template_of_independent_resources(RESOURCES);
    let next = Arc::new(AtomicUsize::new(0));
    let created = Arc::new(AtomicUsize::new(0));
    let started = Instant::now();
    let mut workers = JoinSet::new();
    for _ in 0..bench.clients {
        let client = child.client();
        let (template, next, created) = (template.clone(), next.clone(), created.clone());
        let (stacks, pid) = (bench.stacks, child.pid);
        workers.spawn(async move {
            loop {
                let index = next.fetch_add(1, Ordering::Relaxed);
                if index >= stacks {
                    return Ok(());
                }
                client
                    .create_and_wait(&format!("idle-{index}"), &template)
                    .await?;
                let done = created.fetch_add(1, Ordering::Relaxed) + 1;
                if done % step == 0 {
                    let memory = read_memory(pid)?;
                    let seconds = started.elapsed().as_secs_f64();
                    println!(
                        "{done:>10} {seconds:>10.1} {:>10.1} {:>10.1}",
                        done as f64 / seconds,
                        megabytes(memory.resident_kb)
                    );
                }
            }
        });
    }
    child
        .supervise(&mut workers, "creating the idle stacks", |_| {})
        .await
}

/// Phase 2: create/delete cycles for `bench.loop_duration`, from `before`
/// (the idle reading after phase 1).
async fn churn(child: &mut DevChild, bench: &MemoryBench, before: Memory) -> Result<(), String> {
    let report_every = REPORT_EVERY.min(bench.loop_duration / 10).max(SAMPLE_EVERY);
    println!(
        "phase 2: {} clients each create a stack of {RESOURCES} None, wait for CREATE_COMPLETE, \
         delete it and wait until it is gone, for {} s",
        bench.clients,
        bench.loop_duration.as_secs()
    );
    if let Some(every) = bench.purge_every {
        println!(
            "  an admin purges what was deleted more than {} s ago every {} s",
            PURGE_OLDER_THAN.as_secs(),
            every.as_secs()
        );
    }
    println!(
        "{:>10} {:>10} {:>10} {:>10} {:>10}",
        "seconds", "cycles", "cycles/s", "RSS MB", "disk MB"
    );
    let template = template_of_independent_resources(RESOURCES);
    let cycles = Arc::new(AtomicUsize::new(0));
    let started = Instant::now();
    let mut workers = JoinSet::new();
    for worker in 0..bench.clients {
        let client = child.client();
        let (template, cycles) = (template.clone(), cycles.clone());
        let duration = bench.loop_duration;
        workers.spawn(async move {
            let mut round = 0usize;
            while started.elapsed() < duration {
                let (stack, _) = client
                    .create_and_wait(&format!("cycle-{worker}-{round}"), &template)
                    .await?;
                client.delete_and_wait(&stack).await?;
                cycles.fetch_add(1, Ordering::Relaxed);
                round += 1;
            }
            Ok(())
        });
    }
    if let Some(every) = bench.purge_every {
        let purger = child.purger().await?;
        let duration = bench.loop_duration;
        workers.spawn(async move {
            while started.elapsed() + every < duration {
                tokio::time::sleep(every).await;
                purger.purge().await?;
            }
            Ok(())
        });
    }
    // (seconds into the loop, cycles done, RSS in kB), one a second.
    let mut samples = vec![(0.0, 0usize, before.resident_kb)];
    let data_dir = child.data_dir.path().to_owned();
    let disk_at_start = bytes_on_disk(&data_dir)?;
    // The data directory's size at each report line.
    let mut disk = vec![disk_at_start];
    let mut next_report = report_every;
    child
        .supervise(&mut workers, "creating and deleting stacks", |memory| {
            let elapsed = started.elapsed();
            let done = cycles.load(Ordering::Relaxed);
            samples.push((elapsed.as_secs_f64(), done, memory.resident_kb));
            if elapsed >= next_report {
                next_report += report_every;
                // Unreadable mid-checkpoint at worst: the last size stands.
                let bytes = bytes_on_disk(&data_dir)
                    .unwrap_or_else(|_| disk.last().copied().unwrap_or_default());
                disk.push(bytes);
                println!(
                    "{:>10.0} {done:>10} {:>10.1} {:>10.1} {:>10.1}",
                    elapsed.as_secs_f64(),
                    done as f64 / elapsed.as_secs_f64(),
                    megabytes(memory.resident_kb),
                    bytes as f64 / 1e6
                );
            }
        })
        .await?;
    let cycles = cycles.load(Ordering::Relaxed);
    let end = child.memory("finishing the create/delete loop")?;
    samples.push((started.elapsed().as_secs_f64(), cycles, end.resident_kb));
    let resident = samples.iter().map(|(_, _, kb)| *kb);
    let (least, most) = (resident.clone().min(), resident.max());
    println!(
        "RSS over {cycles} cycles: start {:.1} MB, end {:.1} MB, min {:.1} MB, max {:.1} MB",
        megabytes(before.resident_kb),
        megabytes(end.resident_kb),
        megabytes(least.unwrap_or_default()),
        megabytes(most.unwrap_or_default())
    );
    settle(child, bench.settle, "idling after the loop").await?;
    let after = child.memory("idling after the loop")?;
    println!(
        "idle {} s after the loop: RSS {:.1} MB, peak (VmHWM) {:.1} MB",
        bench.settle.as_secs(),
        megabytes(after.resident_kb),
        megabytes(after.peak_kb)
    );
    // The first tenth of the loop is the step from idle to the working set
    // of the clients' stacks in flight, not growth: the fit leaves it out.
    let warm = bench.loop_duration.as_secs_f64() / 10.0;
    let fitted: Vec<(f64, f64)> = samples
        .iter()
        .filter(|(seconds, _, _)| *seconds >= warm)
        .map(|(_, done, kb)| (*done as f64 / 1000.0, megabytes(*kb)))
        .collect();
    let fit = slope(&fitted).map_or("n/a (too few samples)".to_owned(), |mb| {
        format!("{mb:+.2} MB")
    });
    let idle_to_idle = if cycles == 0 {
        "n/a (no cycle finished)".to_owned()
    } else {
        let grown = megabytes(after.resident_kb) - megabytes(before.resident_kb);
        format!("{:+.2} MB", grown / (cycles as f64 / 1000.0))
    };
    println!(
        "growth per 1,000 cycles: linear fit of RSS over cycles (samples after the first \
         tenth of the loop) {fit}; idle after − idle before, over all cycles {idle_to_idle}"
    );
    let disk_at_end = bytes_on_disk(&data_dir)?;
    disk.push(disk_at_end);
    // The second half against the first: growth that goes on, not the
    // working set's first step.
    let half = disk.len() / 2;
    let most_before = disk[..half.max(1)]
        .iter()
        .max()
        .copied()
        .unwrap_or_default();
    let most_after = disk[half..].iter().max().copied().unwrap_or_default();
    println!(
        "data dir over the loop: start {:.1} MB, end {:.1} MB, largest in the first half {:.1} MB, in the second {:.1} MB",
        disk_at_start as f64 / 1e6,
        disk_at_end as f64 / 1e6,
        most_before as f64 / 1e6,
        most_after as f64 / 1e6
    );
    println!("  data dir on disk: {}", disk_usage(child.data_dir.path())?);
    Ok(())
}

/// An admin's purge of what was deleted, over the gateway's gRPC door.
struct Purger {
    channel: tonic::transport::Channel,
    bearer: tonic::metadata::MetadataValue<tonic::metadata::Ascii>,
}

impl Purger {
    async fn purge(&self) -> Result<(), String> {
        use ember_proto::engine::v1 as pb;
        use ember_proto::engine::v1::maintenance_service_client::MaintenanceServiceClient;
        let mut request = tonic::Request::new(pb::PurgeRequest {
            older_than_seconds: PURGE_OLDER_THAN.as_secs(),
        });
        request
            .metadata_mut()
            .insert("authorization", self.bearer.clone());
        MaintenanceServiceClient::new(self.channel.clone())
            .purge(request)
            .await
            .map(drop)
            .map_err(|status| format!("purge: {}", status.message()))
    }
}

/// Leaves Ember idle for `duration`, then checks it is still running.
async fn settle(child: &mut DevChild, duration: Duration, during: &str) -> Result<(), String> {
    tokio::time::sleep(duration).await;
    child.check_alive(during)
}

/// `ember dev` started by the benchmark: the process, where it listens,
/// a member's token, and its data directory and log (both removed on drop).
struct DevChild {
    process: tokio::process::Child,
    pid: u32,
    gateway: SocketAddr,
    token: String,
    data_dir: tempfile::TempDir,
    log: tempfile::NamedTempFile,
}

impl DevChild {
    /// Starts `ember dev` (as `ember bench startup` does) with quotas that
    /// let the benchmark's stacks in, and waits for /healthz and the
    /// credentials it writes.
    async fn start(bench: &MemoryBench) -> Result<DevChild, String> {
        let executable = std::env::current_exe().map_err(|error| error.to_string())?;
        let data_dir = tempfile::tempdir().map_err(|error| error.to_string())?;
        let log = tempfile::NamedTempFile::new().map_err(|error| error.to_string())?;
        let log_file = log.reopen().map_err(|error| error.to_string())?;
        let port = super::free_port()?;
        // The default quotas (512 stacks, 100 operations at once) would
        // refuse the benchmark's stacks before they measure anything.
        let stacks_quota = (bench.stacks + bench.clients).max(512);
        let operations_quota = bench.clients.max(100);
        let process = super::spawn_dev(
            &executable,
            port,
            data_dir.path(),
            &[
                ("EMBER_ENGINE__QUOTAS__STACKS", stacks_quota.to_string()),
                (
                    "EMBER_ENGINE__QUOTAS__CONCURRENT_OPERATIONS",
                    operations_quota.to_string(),
                ),
            ],
            log_file.into(),
        )?;
        let pid = process.id().ok_or("ember dev exited as it started")?;
        let mut child = DevChild {
            process,
            pid,
            gateway: SocketAddr::from(([127, 0, 0, 1], port)),
            token: String::new(),
            data_dir,
            log,
        };
        child.token = child.wait_until_ready().await?;
        Ok(child)
    }

    /// The member's token once /healthz answers 200 and the credentials
    /// file is written (it is written after the services start).
    async fn wait_until_ready(&mut self) -> Result<String, String> {
        let http = reqwest::Client::new();
        let url = format!("http://{}/healthz", self.gateway);
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            self.check_alive("starting")?;
            if let Ok(response) = http.get(&url).send().await
                && response.status().is_success()
                && let Ok(credentials) = DevCredentials::read(self.data_dir.path())
            {
                return Ok(credentials.member.token);
            }
            if Instant::now() > deadline {
                return Err(format!(
                    "ember dev did not become ready (/healthz 200 and its credentials \
                     written) within 60 s; the last lines of its log:\n{}",
                    self.log_tail()
                ));
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// The admin's purge, over a gRPC connection of its own.
    async fn purger(&self) -> Result<Purger, String> {
        let credentials = DevCredentials::read(self.data_dir.path())?;
        let bearer = format!("Bearer {}", credentials.admin.token)
            .parse()
            .map_err(|_| "the admin token is not a header value".to_owned())?;
        Ok(Purger {
            channel: super::connect(self.gateway).await?,
            bearer,
        })
    }

    /// A keep-alive REST client as the member, waiting as a script would.
    fn client(&self) -> RestStacks {
        RestStacks::new(self.gateway, &self.token).polling_every(POLL)
    }

    /// An error naming what stopped `ember dev` if it has exited.
    fn check_alive(&mut self, during: &str) -> Result<(), String> {
        match self.process.try_wait() {
            Ok(None) => Ok(()),
            Ok(Some(status)) => Err(format!(
                "ember dev exited ({status}) while {during}; the last lines of its log:\n{}",
                self.log_tail()
            )),
            Err(error) => Err(format!("cannot check on ember dev while {during}: {error}")),
        }
    }

    fn memory(&mut self, during: &str) -> Result<Memory, String> {
        self.check_alive(during)?;
        read_memory(self.pid)
    }

    /// Waits for the clients, sampling the RSS every second (`on_sample`)
    /// and checking the child is alive: the first failure stops them all,
    /// named with what was under way (and the child's end if it died).
    async fn supervise(
        &mut self,
        workers: &mut JoinSet<Result<(), String>>,
        during: &str,
        mut on_sample: impl FnMut(Memory),
    ) -> Result<(), String> {
        let mut ticker = tokio::time::interval(SAMPLE_EVERY);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        ticker.tick().await;
        loop {
            tokio::select! {
                joined = workers.join_next() => match joined {
                    None => return Ok(()),
                    Some(Ok(Ok(()))) => {}
                    Some(Ok(Err(error))) => {
                        workers.abort_all();
                        // A client's connection error is only the symptom
                        // when Ember itself died: name both.
                        return Err(match self.check_alive(during) {
                            Ok(()) => format!("{during}: {error}"),
                            Err(death) => format!("{during}: {error}\n{death}"),
                        });
                    }
                    Some(Err(error)) => {
                        workers.abort_all();
                        return Err(format!("{during}: a client task failed: {error}"));
                    }
                },
                _ = ticker.tick() => {
                    let memory = match self.memory(during) {
                        Ok(memory) => memory,
                        Err(error) => {
                            workers.abort_all();
                            return Err(error);
                        }
                    };
                    on_sample(memory);
                }
            }
        }
    }

    /// SIGTERM, then waits for a clean exit.
    async fn stop(mut self) -> Result<(), String> {
        self.check_alive("the benchmark ran")?;
        let pid = i32::try_from(self.pid).map_err(|error| error.to_string())?;
        let started = Instant::now();
        nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(pid),
            nix::sys::signal::Signal::SIGTERM,
        )
        .map_err(|error| format!("cannot signal ember dev: {error}"))?;
        let status = tokio::time::timeout(Duration::from_secs(30), self.process.wait())
            .await
            .map_err(|_| "ember dev did not exit within 30 s of SIGTERM".to_owned())?
            .map_err(|error| error.to_string())?;
        if !status.success() {
            return Err(format!(
                "ember dev exited with {status} after SIGTERM; the last lines of its log:\n{}",
                self.log_tail()
            ));
        }
        println!(
            "ember dev stopped {:.1} s after SIGTERM",
            started.elapsed().as_secs_f64()
        );
        Ok(())
    }

    /// The last lines `ember dev` wrote to stderr (warnings and errors).
    fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(self.log.path()).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        let tail = lines[lines.len().saturating_sub(20)..].join("\n");
        if tail.is_empty() {
            "(nothing)".to_owned()
        } else {
            tail
        }
    }
}

/// A process's resident set now and at its peak, in kB.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Memory {
    resident_kb: u64,
    peak_kb: u64,
}

fn read_memory(pid: u32) -> Result<Memory, String> {
    let path = format!("/proc/{pid}/status");
    let status =
        std::fs::read_to_string(&path).map_err(|error| format!("cannot read {path}: {error}"))?;
    parse_memory(&status).ok_or_else(|| format!("{path} has no VmRSS and VmHWM lines"))
}

/// VmRSS and VmHWM of a `/proc/<pid>/status` text (`VmRSS:  1234 kB`).
fn parse_memory(status: &str) -> Option<Memory> {
    let field = |name: &str| {
        status.lines().find_map(|line| {
            let value = line.strip_prefix(name)?.strip_prefix(':')?;
            value.trim().strip_suffix("kB")?.trim().parse::<u64>().ok()
        })
    };
    Some(Memory {
        resident_kb: field("VmRSS")?,
        peak_kb: field("VmHWM")?,
    })
}

fn megabytes(kilobytes: u64) -> f64 {
    kilobytes as f64 * 1024.0 / 1e6
}

/// The least-squares slope of `y` over `x`; `None` without two distinct `x`.
fn slope(points: &[(f64, f64)]) -> Option<f64> {
    let count = points.len() as f64;
    let mean_x = points.iter().map(|(x, _)| x).sum::<f64>() / count;
    let mean_y = points.iter().map(|(_, y)| y).sum::<f64>() / count;
    let covariance: f64 = points
        .iter()
        .map(|(x, y)| (x - mean_x) * (y - mean_y))
        .sum();
    let variance: f64 = points.iter().map(|(x, _)| (x - mean_x).powi(2)).sum();
    (variance > 0.0).then(|| covariance / variance)
}

/// The blocks `directory` holds on disk: the total, then each top-level
/// entry (the services' databases and their write-ahead logs), largest
/// first.
fn disk_usage(directory: &Path) -> Result<String, String> {
    let mut entries = Vec::new();
    let listing = std::fs::read_dir(directory)
        .map_err(|error| format!("cannot list {}: {error}", directory.display()))?;
    for entry in listing {
        let entry = entry.map_err(|error| format!("{}: {error}", directory.display()))?;
        let bytes = bytes_on_disk(&entry.path())?;
        entries.push((entry.file_name().to_string_lossy().into_owned(), bytes));
    }
    entries.sort_by_key(|(_, bytes)| std::cmp::Reverse(*bytes));
    let total: u64 = entries.iter().map(|(_, bytes)| bytes).sum();
    // Files under 0.05 MB (secrets, credentials, empty databases) would
    // print as 0.0: they are counted, not named.
    let (large, small): (Vec<_>, Vec<_>) = entries
        .iter()
        .partition(|(_, bytes)| *bytes as f64 / 1e6 >= 0.05);
    let mut parts: Vec<String> = large
        .iter()
        .map(|(name, bytes)| format!("{name} {:.1}", *bytes as f64 / 1e6))
        .collect();
    if !small.is_empty() {
        parts.push(format!("{} smaller files", small.len()));
    }
    Ok(format!(
        "{:.1} MB ({})",
        total as f64 / 1e6,
        parts.join(", ")
    ))
}

fn bytes_on_disk(path: &Path) -> Result<u64, String> {
    use std::os::unix::fs::MetadataExt;
    let metadata =
        std::fs::symlink_metadata(path).map_err(|error| format!("{}: {error}", path.display()))?;
    let mut bytes = metadata.blocks() * 512;
    if metadata.is_dir() {
        let listing =
            std::fs::read_dir(path).map_err(|error| format!("{}: {error}", path.display()))?;
        for entry in listing {
            let entry = entry.map_err(|error| format!("{}: {error}", path.display()))?;
            bytes += bytes_on_disk(&entry.path())?;
        }
    }
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_resident_set_and_its_peak_from_proc_status() {
        let status = "Name:\tember\nVmPeak:\t  900000 kB\nVmHWM:\t   204800 kB\n\
                      VmRSS:\t   102400 kB\nThreads:\t12\n";
        assert_eq!(
            parse_memory(status),
            Some(Memory {
                resident_kb: 102_400,
                peak_kb: 204_800
            })
        );
        // A zombie's status has neither line.
        assert_eq!(parse_memory("Name:\tember\nState:\tZ (zombie)\n"), None);
    }

    #[test]
    fn reads_this_process_memory() {
        let memory = read_memory(std::process::id()).expect("own /proc status");
        assert!(memory.resident_kb > 0);
        assert!(memory.peak_kb >= memory.resident_kb);
    }

    #[test]
    fn the_fitted_slope_is_the_growth_per_unit_and_needs_two_points() {
        let growing = [(0.0, 100.0), (1.0, 102.0), (2.0, 104.0), (3.0, 106.0)];
        assert_eq!(slope(&growing), Some(2.0));
        let flat = [
            (0.0, 50.0),
            (1.0, 51.0),
            (2.0, 50.0),
            (3.0, 49.0),
            (4.0, 50.0),
        ];
        assert_eq!(slope(&flat), Some(-0.2));
        assert_eq!(slope(&[(1.0, 10.0), (1.0, 12.0)]), None);
        assert_eq!(slope(&[]), None);
    }
}
