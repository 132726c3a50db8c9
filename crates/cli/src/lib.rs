//! The `ember` binary's library: configuration for all services, running
//! them (`ember dev`, `ember serve`), and the operator's client commands.
//! End-to-end tests start Ember through [`dev::RunningEmber`] exactly as
//! `ember dev` does.
#![forbid(unsafe_code)]

pub mod backup;
pub mod bench;
pub mod browser;
pub mod client;
pub mod commands;
pub mod config;
pub mod dev;
pub mod error;
