//! End-to-end tests: real services on ephemeral ports, called through the
//! gateway the way users and operators call them.

mod audit;
mod body_fuzz;
mod cluster_locks;
mod clusters;
mod clusters_compat;
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
mod protection;
mod quotas;
mod senlin_cli;
mod senlin_config;
mod senlin_lists;
mod senlin_messages;
mod senlin_names;
mod senlin_nats_receivers;
mod senlin_nodes;
mod senlin_ops;
mod senlin_receivers;
mod senlin_updates;
mod unhealthy;
mod webhook_targets;
