//! Plugins as the registry keeps them, and the rules a registration must
//! follow. Pure: no I/O, no proto, no SQL.

mod plugin;

pub use plugin::{FailureMode, NewPlugin, Operation, Plugin};
