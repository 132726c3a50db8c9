//! The lifecycle-hook schema, one migration per file, applied at start-up.

use sea_orm_migration::prelude::*;

mod m20261122_000001_create_pending_lifecycle_actions;
mod m20261122_200002_add_deadlines_queue_events;
mod m20261123_000001_add_queue_projects;
mod m20261210_000001_add_transition_type;

pub struct Migrator;

#[async_trait::async_trait]
impl MigratorTrait for Migrator {
    fn migrations() -> Vec<Box<dyn MigrationTrait>> {
        vec![
            Box::new(m20261122_000001_create_pending_lifecycle_actions::Migration),
            Box::new(m20261122_200002_add_deadlines_queue_events::Migration),
            Box::new(m20261123_000001_add_queue_projects::Migration),
            Box::new(m20261210_000001_add_transition_type::Migration),
        ]
    }
}
