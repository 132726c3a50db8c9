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

/// The most items one list call returns.
pub const MAX_PAGE_SIZE: u32 = 1000;
/// What one list call returns when it names no limit.
pub const DEFAULT_PAGE_SIZE: u32 = 100;

pub use resource::{Event, Resource};
pub use stack::{
    ActionStatus, LockLevel, MaintenanceLock, Stack, StackAction, StackDefinition, StackSnapshot,
    StackWideAction,
};
