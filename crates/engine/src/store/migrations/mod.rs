//! The engine's schema, one migration per file, applied at start-up.

use sea_orm_migration::prelude::*;

mod m20261122_000001_create_stacks;
mod m20261122_000002_create_resources_events_leases;
mod m20261122_000003_add_stack_maintenance_locks;
mod m20261122_100001_create_instances;
mod m20261122_200001_create_clusters;

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
        ]
    }
}
