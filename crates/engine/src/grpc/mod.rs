//! Thin gRPC handlers: decode, call the domain or a store, encode.

pub mod identity;
pub mod stacks;
