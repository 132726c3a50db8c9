//! `--wait [--wait-timeout SECONDS]`, the same on every command that can
//! wait for what it started. `--timeout`, where a command has it, is the
//! operation's own limit in minutes (as Heat's), never how long to wait.

use std::time::Duration;

#[derive(Debug, Clone, Default, clap::Args)]
pub struct WaitArgs {
    /// Show the operation's progress and wait until it ends; exit non-zero
    /// if it fails
    #[arg(long)]
    pub wait: bool,
    /// With --wait: stop waiting after this many seconds (the operation
    /// goes on)
    #[arg(
        long,
        value_name = "SECONDS",
        default_value_t = 3600,
        requires = "wait"
    )]
    pub wait_timeout: u64,
}

impl WaitArgs {
    pub fn timeout(&self) -> Duration {
        Duration::from_secs(self.wait_timeout)
    }
}
