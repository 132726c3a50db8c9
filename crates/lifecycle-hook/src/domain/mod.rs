//! Pending lifecycle actions and their delivery state, what a list of them
//! asks for, and the events and queue messages kept about them. Pure: no
//! I/O.

mod pending_action;
mod query;
mod records;

pub use pending_action::{
    DeliveryState, MAX_TIMEOUTS_PER_WAIT, NewPendingAction, PendingLifecycleAction, Resolution,
    Target, Transition,
};
pub use query::{DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE, PendingListQuery, page_size};
pub use records::{HookEvent, QueueMessage};
