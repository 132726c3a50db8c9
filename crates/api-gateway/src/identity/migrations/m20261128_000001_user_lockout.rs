//! Keystone's account lockout: how many passwords a user got wrong in a
//! row, and when the last one was (reset by a right one, by an admin's
//! unlock, or by a password change).

use sea_orm_migration::prelude::*;

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
        // One column per statement: SQLite adds one at a time.
        manager
            .alter_table(
                Table::alter()
                    .table(IdentityUsers::Table)
                    .add_column(
                        ColumnDef::new(IdentityUsers::FailedAuthCount)
                            .integer()
                            .not_null()
                            .default(0),
                    )
                    .to_owned(),
            )
            .await?;
        manager
            .alter_table(
                Table::alter()
                    .table(IdentityUsers::Table)
                    .add_column(
                        ColumnDef::new(IdentityUsers::FailedAuthAt)
                            .timestamp_with_time_zone()
                            .null(),
                    )
                    .to_owned(),
            )
            .await
    }
}
