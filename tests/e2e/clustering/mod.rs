//! The Clustering API (Senlin v1) end to end: clusters and their actions,
//! nodes, policies, receivers and webhooks, lifecycle hooks and their
//! results, locks, protection and remediation, and Senlin's own clients.

pub(crate) mod cluster_locks;
pub(crate) mod clusters;
mod clusters_compat;
mod hook_results;
mod protection;
mod remediation;
mod senlin_cli;
mod senlin_config;
mod senlin_lists;
mod senlin_messages;
mod senlin_names;
mod senlin_nats_receivers;
mod senlin_nodes;
mod senlin_ops;
pub(crate) mod senlin_receivers;
mod senlin_updates;
mod webhook_targets;
