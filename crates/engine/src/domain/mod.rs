//! The engine's pure types and state machines: no I/O, no proto, no SQL.

pub mod stack;

pub use stack::{ActionStatus, Stack, StackAction};
