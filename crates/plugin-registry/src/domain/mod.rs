//! Plugins as the registry keeps them, the rules a registration must follow,
//! and what a plugin call can come to. Pure: no I/O, no proto, no SQL.

mod circuit;
mod outcome;
mod plugin;

pub use circuit::{
    BreakerSettings, Circuit, CircuitRecord, DEFAULT_BREAKER_COOLDOWN_MS, DEFAULT_BREAKER_FAILURES,
    PROBE_GRACE,
};
pub use outcome::{CallResult, PluginCallOutcome, PluginPhase, PreOperationsReport, stop_reason};
pub use plugin::{FailureMode, NewPlugin, Operation, Plugin, PluginUpdate};
