//! The engine's schema, one migration per file, applied at start-up.

use sea_orm_migration::prelude::*;

mod m20261122_000001_create_stacks;
mod m20261122_000002_create_resources_events_leases;
mod m20261122_000003_add_stack_maintenance_locks;
mod m20261122_100001_create_instances;
mod m20261122_200001_create_clusters;
mod m20261123_000001_add_stack_lease_generations;
mod m20261123_000002_index_live_root_stacks;
mod m20261123_100001_add_cluster_locks_and_action_attempts;
mod m20261123_200001_create_project_quotas;
mod m20261124_100001_add_instance_workloads_and_events;
mod m20261124_200001_create_wait_condition_signals;
mod m20261124_200002_create_breakpoint_hooks;
mod m20261124_200003_create_software_configs_and_deployments;
mod m20261125_000001_create_stack_snapshots;
mod m20261126_000001_add_senlin_fields;
mod m20261126_300001_create_receivers;
mod m20261127_200001_create_receiver_messages;
mod m20261128_100001_add_cluster_config;
mod m20261129_100001_create_stack_update_origins;
mod m20261130_100001_cover_cluster_members;
mod m20261201_100001_keep_cluster_member_ids;
mod m20261202_100001_index_project_lists_by_id;
mod m20261203_100001_add_stack_definition_versions;
mod m20261204_100001_add_stack_lease_holders;
mod m20261205_100001_create_delegations;
mod m20261205_100002_add_instance_placements;
mod m20261206_100001_add_stack_lease_stop_requests;
mod m20261207_100001_add_cluster_maintenance_locks;
mod m20261207_100002_add_instance_lock_expiry;
mod m20261207_100003_add_stack_lock_expiry;
mod m20261208_100001_create_audit_records;
mod m20261209_100001_add_node_protection;
mod m20261210_100001_chunk_cluster_member_ids;
mod m20261211_100001_count_project_instances;

pub struct Migrator;

#[async_trait::async_trait]
impl MigratorTrait for Migrator {
    fn migrations() -> Vec<Box<dyn MigrationTrait>> {
        vec![
            Box::new(m20261122_000001_create_stacks::Migration),
            Box::new(m20261122_000002_create_resources_events_leases::Migration),
            Box::new(m20261122_000003_add_stack_maintenance_locks::Migration),
            Box::new(m20261122_100001_create_instances::Migration),
            Box::new(m20261122_200001_create_clusters::Migration),
            Box::new(m20261123_000001_add_stack_lease_generations::Migration),
            Box::new(m20261123_000002_index_live_root_stacks::Migration),
            Box::new(m20261123_100001_add_cluster_locks_and_action_attempts::Migration),
            Box::new(m20261123_200001_create_project_quotas::Migration),
            Box::new(m20261124_100001_add_instance_workloads_and_events::Migration),
            Box::new(m20261124_200001_create_wait_condition_signals::Migration),
            Box::new(m20261124_200002_create_breakpoint_hooks::Migration),
            Box::new(m20261124_200003_create_software_configs_and_deployments::Migration),
            Box::new(m20261125_000001_create_stack_snapshots::Migration),
            Box::new(m20261126_000001_add_senlin_fields::Migration),
            Box::new(m20261126_300001_create_receivers::Migration),
            Box::new(m20261127_200001_create_receiver_messages::Migration),
            Box::new(m20261128_100001_add_cluster_config::Migration),
            Box::new(m20261129_100001_create_stack_update_origins::Migration),
            Box::new(m20261130_100001_cover_cluster_members::Migration),
            Box::new(m20261201_100001_keep_cluster_member_ids::Migration),
            Box::new(m20261202_100001_index_project_lists_by_id::Migration),
            Box::new(m20261203_100001_add_stack_definition_versions::Migration),
            Box::new(m20261204_100001_add_stack_lease_holders::Migration),
            Box::new(m20261205_100001_create_delegations::Migration),
            Box::new(m20261205_100002_add_instance_placements::Migration),
            Box::new(m20261206_100001_add_stack_lease_stop_requests::Migration),
            Box::new(m20261207_100001_add_cluster_maintenance_locks::Migration),
            Box::new(m20261207_100002_add_instance_lock_expiry::Migration),
            Box::new(m20261207_100003_add_stack_lock_expiry::Migration),
            Box::new(m20261208_100001_create_audit_records::Migration),
            Box::new(m20261209_100001_add_node_protection::Migration),
            Box::new(m20261210_100001_chunk_cluster_member_ids::Migration),
            Box::new(m20261211_100001_count_project_instances::Migration),
        ]
    }
}
