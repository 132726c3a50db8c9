//! Plugins as the registry keeps them, the rules a registration must follow,
//! and what a plugin call can come to. Pure: no I/O, no proto, no SQL.

mod outcome;
mod plugin;

pub use outcome::{CallResult, PluginCallOutcome, PluginPhase, PreOperationsReport, stop_reason};
pub use plugin::{FailureMode, NewPlugin, Operation, Plugin, PluginUpdate};
