//! Breakpoint hooks a stack operation is paused at (Heat's `hooks` in the
//! environment): one row while a resource waits at its hook, removed when
//! `{"unset_hook": …}` clears it — on any engine replica.

use ember_runtime::migration;
use sea_orm_migration::prelude::*;
use sea_orm_migration::schema;

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
enum BreakpointHooks {
    Table,
    StackId,
    ResourceName,
    Hook,
    SetAt,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .create_table(
                Table::create()
                    .table(BreakpointHooks::Table)
                    .if_not_exists()
                    .col(schema::uuid(BreakpointHooks::StackId))
                    .col(schema::string_len(BreakpointHooks::ResourceName, 255))
                    .col(schema::string_len(BreakpointHooks::Hook, 16))
                    .col(schema::timestamp_with_time_zone(BreakpointHooks::SetAt))
                    .primary_key(
                        Index::create()
                            .col(BreakpointHooks::StackId)
                            .col(BreakpointHooks::ResourceName)
                            .col(BreakpointHooks::Hook),
                    )
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        migration::drop_tables(manager, [BreakpointHooks::Table]).await
    }
}
