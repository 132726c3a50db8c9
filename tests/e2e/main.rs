//! End-to-end tests: real services on ephemeral ports, called through the
//! gateway the way users and operators call them.

mod audit;
mod body_fuzz;
mod clustering;
mod concurrency;
mod connections;
mod containers;
mod cross_project;
mod cross_role;
mod gateway_grpc;
mod gateway_rest;
mod grpcurl;
mod health;
mod hostile;
mod identity;
mod instances;
mod internal_services;
mod openstack;
mod orchestration;
mod plugins;
mod quotas;
mod unhealthy;
