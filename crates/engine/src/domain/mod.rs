//! The engine's pure types and state machines: no I/O, no proto, no SQL.

pub mod admission;
pub mod audit;
pub mod cluster;
pub mod delegation;
pub mod instance;
pub mod quota;
pub mod receiver;
pub mod resource;
pub mod software;
pub mod stack;
pub mod template;
pub mod wait_condition;

pub use resource::{Event, Resource};
pub use stack::{
    ActionStatus, LockLevel, MaintenanceLock, Stack, StackAction, StackDefinition, StackSnapshot,
};
