use ember_runtime::migration;
use sea_orm_migration::prelude::*;
use sea_orm_migration::schema;

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
enum Stacks {
    Table,
    LockLevel,
    LockedByUser,
    LockedByAdmin,
    LockedAt,
    LockReason,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        // The maintenance lock (spec heat-lock-stack): who, when, how far, why.
        migration::add_columns(
            manager,
            Stacks::Table,
            [
                schema::string_len_null(Stacks::LockLevel, 16),
                schema::string_len_null(Stacks::LockedByUser, 64),
                schema::boolean_null(Stacks::LockedByAdmin),
                schema::timestamp_with_time_zone_null(Stacks::LockedAt),
                schema::text_null(Stacks::LockReason),
            ],
        )
        .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        migration::drop_columns(
            manager,
            Stacks::Table,
            [
                Stacks::LockLevel,
                Stacks::LockedByUser,
                Stacks::LockedByAdmin,
                Stacks::LockedAt,
                Stacks::LockReason,
            ],
        )
        .await
    }
}
