//! Thin gRPC handlers: decode, call the domain or a store, encode.

pub mod convert;
pub mod events;
pub mod identity;
pub mod instances;
pub mod resources;
pub mod stacks;
