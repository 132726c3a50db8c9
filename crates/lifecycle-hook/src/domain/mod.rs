//! Pending lifecycle actions and their delivery state. Pure: no I/O.

mod pending_action;

pub use pending_action::{
    DeliveryState, MAX_TIMEOUTS_PER_WAIT, PendingLifecycleAction, Resolution, Target, Transition,
};
