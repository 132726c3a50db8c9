//! Thin gRPC handlers: the registry (admin only) and the runner (internal,
//! for the engine), with the proto conversions they share.

mod convert;
mod registry;
mod runner;

pub use registry::PluginRegistryHandler;
pub use runner::PluginRunnerHandler;
