//! Where the machine's CPU went during a window, from `/proc`: this
//! process (clients, gateway, engines) against the rest (PostgreSQL and
//! anything else running).

/// Cumulative CPU time, in the kernel's clock ticks: the whole machine's
/// (busy and total, over every core) and this process's.
pub(super) struct CpuSample {
    machine_busy: u64,
    machine_total: u64,
    this_process: u64,
    cores: usize,
}

/// Where the CPU went between two samples.
#[derive(Clone, Copy)]
pub(super) struct CpuShare {
    /// Fraction of all cores busy.
    pub(super) busy: f64,
    pub(super) this_process_cores: f64,
    pub(super) other_cores: f64,
}

impl CpuSample {
    /// From `/proc` (Linux); None elsewhere.
    pub(super) fn take() -> Option<CpuSample> {
        let machine = std::fs::read_to_string("/proc/stat").ok()?;
        let ticks: Vec<u64> = machine
            .lines()
            .next()?
            .split_whitespace()
            .skip(1)
            .filter_map(|field| field.parse().ok())
            .collect();
        // user nice system idle iowait irq softirq steal (guest time is
        // already counted in user).
        let total: u64 = ticks.iter().take(8).sum();
        let idle = ticks.get(3)? + ticks.get(4).unwrap_or(&0);
        let process = std::fs::read_to_string("/proc/self/stat").ok()?;
        // Fields after the command name (which may hold spaces): utime and
        // stime are the 12th and 13th.
        let after_name = process.rsplit_once(')')?.1;
        let fields: Vec<&str> = after_name.split_whitespace().collect();
        let this_process =
            fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
        Some(CpuSample {
            machine_busy: total.saturating_sub(idle),
            machine_total: total,
            this_process,
            // The cores the first line adds up.
            cores: machine
                .lines()
                .filter(|line| {
                    line.strip_prefix("cpu")
                        .is_some_and(|rest| rest.starts_with(|c: char| c.is_ascii_digit()))
                })
                .count()
                .max(1),
        })
    }

    pub(super) fn since(&self, before: &CpuSample) -> CpuShare {
        let total = self
            .machine_total
            .saturating_sub(before.machine_total)
            .max(1) as f64;
        let busy = self.machine_busy.saturating_sub(before.machine_busy) as f64;
        let this_process = self.this_process.saturating_sub(before.this_process) as f64;
        let cores = self.cores as f64;
        CpuShare {
            busy: busy / total,
            this_process_cores: this_process / total * cores,
            other_cores: (busy - this_process).max(0.0) / total * cores,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_share_splits_busy_time_between_this_process_and_the_rest() {
        let before = CpuSample {
            machine_busy: 1_000,
            machine_total: 2_000,
            this_process: 100,
            cores: 2,
        };
        // 400 ticks over 2 cores = 2 s of wall time: 300 busy, 100 of
        // them this process's.
        let after = CpuSample {
            machine_busy: 1_300,
            machine_total: 2_400,
            this_process: 200,
            cores: 2,
        };
        let share = after.since(&before);
        assert!((share.busy - 0.75).abs() < 1e-9, "{}", share.busy);
        assert!((share.this_process_cores - 0.5).abs() < 1e-9);
        assert!((share.other_cores - 1.0).abs() < 1e-9);
    }

    #[test]
    fn a_sample_of_this_machine_is_read_on_linux() {
        if cfg!(target_os = "linux") {
            let sample = CpuSample::take().expect("/proc/stat and /proc/self/stat are readable");
            assert!(sample.machine_total >= sample.machine_busy);
            assert!(sample.cores >= 1);
        }
    }
}
