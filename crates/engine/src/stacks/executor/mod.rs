//! Runs resource actions along the dependency graph: a resource starts as
//! soon as everything it depends on is done (create) or everything that
//! depends on it is gone (delete), so independent resources proceed in
//! parallel. Every transition is recorded (resource row + event) before the
//! run moves on; the first failure stops new starts and lets running ones
//! finish.
//!
//! One file per job: [`shared`] (what every run shares), [`parse_cache`],
//! [`target`] (the stack a run acts on and how a transition is recorded),
//! [`walk`] (the dependency walk), [`create`] and [`delete`].

mod create;
mod delete;
mod parse_cache;
mod shared;
mod target;
mod walk;

pub use create::*;
pub use delete::*;
pub use shared::*;
pub use target::*;
pub use walk::*;
