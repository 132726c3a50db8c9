//! The gateway's schema (its one store: identity), one migration per file,
//! applied at start-up. Its migration table has a name of its own, so the
//! gateway may share a database with another Ember service.

use sea_orm_migration::prelude::*;

mod m20261125_000001_create_identity;
mod m20261128_000001_user_lockout;
mod m20261210_000001_roles_groups_and_enabled;

pub struct Migrator;

#[async_trait::async_trait]
impl MigratorTrait for Migrator {
    fn migrations() -> Vec<Box<dyn MigrationTrait>> {
        vec![
            Box::new(m20261125_000001_create_identity::Migration),
            Box::new(m20261128_000001_user_lockout::Migration),
            Box::new(m20261210_000001_roles_groups_and_enabled::Migration),
        ]
    }

    fn migration_table_name() -> sea_orm::DynIden {
        "gateway_migrations".into_iden()
    }
}
