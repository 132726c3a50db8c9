//! The registry's schema, one migration per file, applied at start-up.

use sea_orm_migration::prelude::*;

mod m20261122_000001_create_plugins;
mod m20261201_000001_create_registry_generation;
mod m20261209_000001_add_plugin_breakers;

pub struct Migrator;

#[async_trait::async_trait]
impl MigratorTrait for Migrator {
    fn migrations() -> Vec<Box<dyn MigrationTrait>> {
        vec![
            Box::new(m20261122_000001_create_plugins::Migration),
            Box::new(m20261201_000001_create_registry_generation::Migration),
            Box::new(m20261209_000001_add_plugin_breakers::Migration),
        ]
    }
}
