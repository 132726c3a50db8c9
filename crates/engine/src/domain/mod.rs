//! The engine's pure types and state machines: no I/O, no proto, no SQL.

pub mod cluster;
pub mod instance;
pub mod resource;
pub mod stack;
pub mod template;

pub use resource::{Event, Resource};
pub use stack::{ActionStatus, LockLevel, MaintenanceLock, Stack, StackAction, StackDefinition};
