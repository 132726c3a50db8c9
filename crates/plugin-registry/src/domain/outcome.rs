//! What one plugin call came to, and the rule that decides whether it stops
//! the chain. The runner does the calling; these types say what happened in
//! a form the engine turns into stack events.

use std::time::Duration;

use super::FailureMode;

/// Which of a plugin's two methods was called.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PluginPhase {
    Pre,
    Post,
}

/// How one call ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallResult {
    /// Pre-operation: go ahead.
    Allow,
    /// Pre-operation: stop, with the plugin's reason.
    Deny,
    /// Pre-operation: go ahead, recording the plugin's warning.
    Warn,
    /// The call itself failed (unreachable, gRPC error, no verdict).
    Error,
    /// No answer within the plugin's timeout.
    Timeout,
    /// Post-operation returned.
    Ok,
    /// Not called: the plug-in's circuit is open (see `circuit`).
    CircuitOpen,
}

impl CallResult {
    /// A deny, an error, a timeout or an open circuit stops the chain in
    /// FAIL mode; in WARN mode nothing does.
    pub fn stops_chain(self, failure_mode: FailureMode) -> bool {
        let is_failure = match self {
            CallResult::Deny
            | CallResult::Error
            | CallResult::Timeout
            | CallResult::CircuitOpen => true,
            CallResult::Allow | CallResult::Warn | CallResult::Ok => false,
        };
        is_failure && failure_mode == FailureMode::Fail
    }

    /// The plug-in could not be asked: what its circuit breaker counts.
    /// (A deny is an answer.)
    pub fn is_unavailable(self) -> bool {
        matches!(self, CallResult::Error | CallResult::Timeout)
    }
}

/// One call to one plugin.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PluginCallOutcome {
    pub plugin: String,
    pub phase: PluginPhase,
    pub result: CallResult,
    /// The plugin's reason or warning, or what went wrong with the call.
    pub message: String,
    pub duration: Duration,
    pub failure_mode: FailureMode,
    /// Post phase: the `failed` flag sent.
    pub failed: bool,
    pub stopped_chain: bool,
    /// The plug-in is in observe mode and this call would have stopped
    /// the chain: recorded, not enforced.
    pub observed: bool,
}

/// The status reason an operation stopped by `plugin` ends with.
pub fn stop_reason(plugin: &str, message: &str) -> String {
    format!("plugin {plugin}: {message}")
}

/// The answer to "may this operation go ahead?".
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PreOperationsReport {
    pub allowed: bool,
    /// `plugin <name>: <reason>` when not allowed, empty otherwise.
    pub reason: String,
    pub calls: Vec<PluginCallOutcome>,
    /// Plugins owed a post-operation, in calling order; empty when not
    /// allowed (they have been unwound already).
    pub post_operation_plugins: Vec<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_failures_in_fail_mode_stop_the_chain() {
        for result in [
            CallResult::Deny,
            CallResult::Error,
            CallResult::Timeout,
            CallResult::CircuitOpen,
        ] {
            assert!(result.stops_chain(FailureMode::Fail), "{result:?}");
            assert!(!result.stops_chain(FailureMode::Warn), "{result:?}");
        }
        for result in [CallResult::Allow, CallResult::Warn, CallResult::Ok] {
            assert!(!result.stops_chain(FailureMode::Fail), "{result:?}");
        }
    }

    #[test]
    fn the_stop_reason_names_the_plugin() {
        assert_eq!(
            stop_reason("quota", "timed out after 250 ms"),
            "plugin quota: timed out after 250 ms"
        );
    }
}
