//! Runs resource actions along the dependency graph: a resource starts as
//! soon as everything it depends on is done (create) or everything that
//! depends on it is gone (delete), so independent resources proceed in
//! parallel. Every transition is recorded (resource row + event) before the
//! run moves on; the first failure stops new starts and lets running ones
//! finish.
//!
//! One file per job: [`stack_engine`] (what every run needs from the
//! engine), [`parse_cache`], [`target`] (the stack a run acts on and how a
//! transition is recorded), [`walk`] (the dependency walk), [`create`] and
//! [`delete`].

mod create;
mod delete;
mod parse_cache;
mod stack_engine;
mod target;
mod walk;

pub use create::*;
pub use delete::*;
pub use stack_engine::*;
pub use target::*;
pub use walk::*;
