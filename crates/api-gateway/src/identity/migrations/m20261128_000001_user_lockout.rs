//! Keystone's account lockout: how many passwords a user got wrong in a
//! row, and when the last one was (reset by a right one, by an admin's
//! unlock, or by a password change).

use ember_runtime::migration;
use sea_orm_migration::prelude::*;
use sea_orm_migration::schema;

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
enum IdentityUsers {
    Table,
    FailedAuthCount,
    FailedAuthAt,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        migration::add_columns(
            manager,
            IdentityUsers::Table,
            [
                schema::integer(IdentityUsers::FailedAuthCount)
                    .default(0)
                    .to_owned(),
                schema::timestamp_with_time_zone_null(IdentityUsers::FailedAuthAt),
            ],
        )
        .await
    }
}
