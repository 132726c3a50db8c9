//! What every Ember service shares: layered configuration, tracing, the gRPC
//! server bootstrap (health, reflection, layers, shutdown), caller identity
//! and tokens, database connections, and the one table that maps error kinds
//! to gRPC codes and HTTP status codes.
#![forbid(unsafe_code)]

pub mod auth;
pub mod call_context;
pub mod channel;
pub mod columns;
pub mod config;
pub mod database;
pub mod egress;
pub mod error;
pub mod https;
pub mod identity;
pub mod ids;
pub mod in_process;
pub mod migration;
pub mod protobuf_json;
pub mod quote;
pub mod reader;
pub mod readiness;
pub mod server;
pub mod shutdown;
pub mod telemetry;
#[cfg(feature = "testing")]
pub mod testing;
pub mod time;

pub use error::ErrorKind;
pub use identity::Identity;
