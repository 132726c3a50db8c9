//! Stack leases become fenced: each take bumps a generation (the fencing
//! token every state write of the operation checks), and a released lease
//! keeps its row (expired) so the generation never goes back.

use ember_runtime::migration;
use sea_orm_migration::prelude::*;
use sea_orm_migration::schema;

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
enum StackLeases {
    Table,
    Generation,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        migration::add_columns(
            manager,
            StackLeases::Table,
            [schema::big_integer(StackLeases::Generation)
                .default(1)
                .to_owned()],
        )
        .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        migration::drop_columns(manager, StackLeases::Table, [StackLeases::Generation]).await
    }
}
