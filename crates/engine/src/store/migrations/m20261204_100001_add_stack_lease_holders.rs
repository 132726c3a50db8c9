//! A stack lease may carry its take's own token, its holder: a take that
//! starts an operation at a generation it saw free gives one
//! (`OperationStart::holder`), and its fence then holds only while the row
//! carries it. The run of such a take may queue its writes before the take
//! commits: if another operation took the lease instead — at the same
//! generation — they are refused. Other takes leave it empty.

use ember_runtime::migration;
use sea_orm_migration::prelude::*;
use sea_orm_migration::schema;

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
enum StackLeases {
    Table,
    Holder,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        migration::add_columns(
            manager,
            StackLeases::Table,
            [schema::uuid_null(StackLeases::Holder)],
        )
        .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        migration::drop_columns(manager, StackLeases::Table, [StackLeases::Holder]).await
    }
}
