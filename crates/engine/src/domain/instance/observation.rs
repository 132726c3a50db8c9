//! What a machine's real state means for its instance. A compute driver
//! reports what it finds (running, exited and how, or gone); this decides,
//! in one place, whether the instance's recorded state contradicts it and
//! what the instance becomes — the rules Nova's power-state sync follows,
//! with the reason always written down:
//!
//! | recorded | machine found | instance becomes |
//! |---|---|---|
//! | ACTIVE (on) | exited cleanly (code 0) | STOPPED (off): it stopped by itself (Nova's SHUTOFF) |
//! | ACTIVE (on) | exited otherwise (code ≠ 0, signal, OOM) | ERROR (off), the exit in the reason |
//! | ACTIVE, STOPPED or died-ERROR | gone | ERROR (nostate): removed outside Ember |
//! | STOPPED (off), or ERROR (off) | running | ACTIVE (on): started outside Ember |
//!
//! Instances with a driver task in progress are never judged here: the
//! task's own outcome settles them (and a machine mid-reboot is briefly
//! exited). Nothing is done *to* the machine: a locked instance's machine
//! is never touched, its record just tells the truth.

use chrono::{DateTime, Utc};

use super::{Instance, InstanceStatus, PowerState};

/// How a stopped machine ended.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct MachineExit {
    pub exit_code: i64,
    /// The kernel killed it for exceeding its memory limit.
    pub oom_killed: bool,
    /// The engine's own error about the machine, if any.
    pub error: String,
    pub finished_at: Option<DateTime<Utc>>,
}

impl MachineExit {
    /// Exited by itself with code 0 and nothing else to say.
    pub fn is_clean(&self) -> bool {
        self.exit_code == 0 && !self.oom_killed && self.error.is_empty()
    }

    /// `exited with code 3`, `killed by SIGKILL (exit code 137)`,
    /// `killed for exceeding its memory limit (OOM, exit code 137)`.
    pub fn describe(&self) -> String {
        let mut text = if self.oom_killed {
            format!(
                "killed for exceeding its memory limit (OOM, exit code {})",
                self.exit_code
            )
        } else if self.exit_code > 128 && self.exit_code < 128 + 65 {
            let signal = self.exit_code - 128;
            match signal_name(signal) {
                Some(name) => format!("killed by {name} (exit code {})", self.exit_code),
                None => format!("killed by signal {signal} (exit code {})", self.exit_code),
            }
        } else {
            format!("exited with code {}", self.exit_code)
        };
        if !self.error.is_empty() {
            text.push_str(&format!(": {}", self.error));
        }
        if let Some(at) = self.finished_at {
            text.push_str(&format!(" at {}", at.format("%Y-%m-%dT%H:%M:%SZ")));
        }
        text
    }
}

fn signal_name(signal: i64) -> Option<&'static str> {
    Some(match signal {
        1 => "SIGHUP",
        2 => "SIGINT",
        3 => "SIGQUIT",
        6 => "SIGABRT",
        9 => "SIGKILL",
        11 => "SIGSEGV",
        13 => "SIGPIPE",
        15 => "SIGTERM",
        _ => return None,
    })
}

/// A machine's state as its driver found it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MachineState {
    Running,
    Exited(MachineExit),
    /// There is no machine for the instance.
    Missing,
}

/// A contradiction found and what to record about it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Observation {
    /// The instance one revision later, in the state the machine is in.
    pub next: Instance,
    /// What happened, for the instance's events (also its status reason
    /// unless the instance became ACTIVE).
    pub reason: String,
}

impl Observation {
    /// Whether the instance's workload is now unhealthy because of what
    /// happened to its machine: cluster nodes and stack checks report it.
    pub fn machine_failed(&self) -> bool {
        matches!(
            self.next.status,
            InstanceStatus::Error | InstanceStatus::Stopped
        )
    }
}

/// Compares `instance`'s record with its `machine` (a `noun` such as
/// "container" names it in reasons); `None` when they agree or the
/// instance is not settled.
pub fn reconcile(
    instance: &Instance,
    machine: &MachineState,
    noun: &str,
    now: DateTime<Utc>,
) -> Option<Observation> {
    use InstanceStatus::{Active, Error, Stopped};
    use PowerState::{NoState, Off, On};
    let (status, power_state, reason) = match (instance.status, instance.power_state, machine) {
        (Active, On, MachineState::Exited(exit)) if exit.is_clean() => (
            Stopped,
            Off,
            format!("the {noun} stopped by itself: {}", exit.describe()),
        ),
        (Active, On, MachineState::Exited(exit)) => {
            (Error, Off, format!("the {noun} died: {}", exit.describe()))
        }
        (Active, On, MachineState::Missing)
        | (Stopped, Off, MachineState::Missing)
        | (Error, Off, MachineState::Missing) => (
            Error,
            NoState,
            format!("the {noun} was removed outside Ember"),
        ),
        (Stopped, Off, MachineState::Running) | (Error, Off, MachineState::Running) => {
            (Active, On, format!("the {noun} was started outside Ember"))
        }
        _ => return None,
    };
    let mut next = instance.next_revision(now);
    next.status = status;
    next.power_state = power_state;
    next.status_reason = if status == Active {
        String::new()
    } else {
        reason.clone()
    };
    Some(Observation { next, reason })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::instance::NewInstance;

    fn instance(status: InstanceStatus, power_state: PowerState) -> Instance {
        let new = NewInstance {
            name: "worker-1".into(),
            flavor: "m1.small".into(),
            image: "busybox".into(),
            ..NewInstance::default()
        };
        Instance {
            status,
            power_state,
            ..Instance::new_building("demo", "demo", new, Utc::now()).expect("valid")
        }
    }

    fn exited(exit_code: i64, oom_killed: bool) -> MachineState {
        MachineState::Exited(MachineExit {
            exit_code,
            oom_killed,
            ..MachineExit::default()
        })
    }

    #[test]
    fn a_running_instance_whose_machine_died_is_error_with_the_exit() {
        let active = instance(InstanceStatus::Active, PowerState::On);
        let killed = reconcile(&active, &exited(137, false), "container", Utc::now())
            .expect("contradiction");
        assert_eq!(killed.next.status, InstanceStatus::Error);
        assert_eq!(killed.next.power_state, PowerState::Off);
        assert_eq!(killed.next.revision, active.revision + 1);
        assert_eq!(
            killed.next.status_reason,
            "the container died: killed by SIGKILL (exit code 137)"
        );
        assert!(killed.machine_failed());
        let oom =
            reconcile(&active, &exited(137, true), "container", Utc::now()).expect("contradiction");
        assert!(oom.reason.contains("memory limit (OOM"), "{}", oom.reason);
        let failed =
            reconcile(&active, &exited(3, false), "container", Utc::now()).expect("contradiction");
        assert!(
            failed.reason.ends_with("exited with code 3"),
            "{}",
            failed.reason
        );
    }

    #[test]
    fn a_clean_exit_is_stopped_and_a_removal_is_error() {
        let active = instance(InstanceStatus::Active, PowerState::On);
        let stopped =
            reconcile(&active, &exited(0, false), "container", Utc::now()).expect("contradiction");
        assert_eq!(
            (stopped.next.status, stopped.next.power_state),
            (InstanceStatus::Stopped, PowerState::Off)
        );
        assert!(stopped.next.status_reason.contains("stopped by itself"));
        let gone = reconcile(&active, &MachineState::Missing, "container", Utc::now())
            .expect("contradiction");
        assert_eq!(
            (gone.next.status, gone.next.power_state),
            (InstanceStatus::Error, PowerState::NoState)
        );
        assert_eq!(gone.reason, "the container was removed outside Ember");
    }

    #[test]
    fn a_machine_started_again_makes_the_instance_active() {
        for (status, power_state) in [
            (InstanceStatus::Stopped, PowerState::Off),
            (InstanceStatus::Error, PowerState::Off),
        ] {
            let mut record = instance(status, power_state);
            record.status_reason = "the container died: …".into();
            let running = reconcile(&record, &MachineState::Running, "container", Utc::now())
                .expect("contradiction");
            assert_eq!(running.next.status, InstanceStatus::Active);
            assert_eq!(running.next.status_reason, "");
            assert!(!running.machine_failed());
        }
    }

    #[test]
    fn agreement_and_unsettled_instances_change_nothing() {
        let cases = [
            (
                InstanceStatus::Active,
                PowerState::On,
                MachineState::Running,
            ),
            (InstanceStatus::Stopped, PowerState::Off, exited(0, false)),
            (InstanceStatus::Stopped, PowerState::Off, exited(137, false)),
            (
                InstanceStatus::Building,
                PowerState::NoState,
                MachineState::Missing,
            ),
            (
                InstanceStatus::Rebooting,
                PowerState::On,
                exited(143, false),
            ),
            (
                InstanceStatus::Active,
                PowerState::PoweringOff,
                exited(143, false),
            ),
            (
                InstanceStatus::Deleting,
                PowerState::On,
                MachineState::Missing,
            ),
            (
                InstanceStatus::Error,
                PowerState::NoState,
                MachineState::Missing,
            ),
            (
                InstanceStatus::Error,
                PowerState::NoState,
                MachineState::Running,
            ),
        ];
        for (status, power_state, machine) in cases {
            let record = instance(status, power_state);
            assert_eq!(
                reconcile(&record, &machine, "container", Utc::now()),
                None,
                "{status:?} {power_state:?} {machine:?}"
            );
        }
    }

    #[test]
    fn exits_describe_their_signal_and_time() {
        let exit = MachineExit {
            exit_code: 143,
            finished_at: DateTime::from_timestamp(1_800_000_000, 0),
            ..MachineExit::default()
        };
        assert_eq!(
            exit.describe(),
            "killed by SIGTERM (exit code 143) at 2027-01-15T08:00:00Z"
        );
        let odd = MachineExit {
            exit_code: 128 + 40,
            error: "runtime says so".into(),
            ..MachineExit::default()
        };
        assert_eq!(
            odd.describe(),
            "killed by signal 40 (exit code 168): runtime says so"
        );
    }
}
