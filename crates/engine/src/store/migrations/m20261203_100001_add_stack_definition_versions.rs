//! A stack's definition gets a version: 1 when the stack is created, moved
//! on by each update, rollback or restore that gives it a new definition.
//! The engine keys its parsed templates by it — `updated_at` moves with
//! every state change, and keying by it made each status read after a
//! transition read and parse the whole template again.

use ember_runtime::migration;
use sea_orm_migration::prelude::*;
use sea_orm_migration::schema;

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
enum Stacks {
    Table,
    DefinitionVersion,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        migration::add_columns(
            manager,
            Stacks::Table,
            [schema::big_integer(Stacks::DefinitionVersion)
                .default(1)
                .to_owned()],
        )
        .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        migration::drop_columns(manager, Stacks::Table, [Stacks::DefinitionVersion]).await
    }
}
