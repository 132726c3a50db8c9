//! Thin gRPC handlers: decode, call the domain or a store, encode.

pub mod cluster_convert;
pub mod clusters;
pub mod convert;
pub mod events;
pub mod identity;
pub mod instances;
pub mod quotas;
pub mod resources;
pub mod software;
pub mod stacks;
