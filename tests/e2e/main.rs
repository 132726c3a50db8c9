//! End-to-end tests: real services on ephemeral ports, called through the
//! gateway the way users and operators call them.

mod clusters;
mod clusters_compat;
mod gateway_grpc;
mod gateway_rest;
mod grpcurl;
mod instances;
mod internal_services;
mod orchestration;
mod plugins;
mod unhealthy;
