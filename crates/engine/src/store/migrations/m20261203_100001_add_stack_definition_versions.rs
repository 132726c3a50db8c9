//! A stack's definition gets a version: 1 when the stack is created, moved
//! on by each update, rollback or restore that gives it a new definition.
//! The engine keys its parsed templates by it — `updated_at` moves with
//! every state change, and keying by it made each status read after a
//! transition read and parse the whole template again.

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
        manager
            .alter_table(
                Table::alter()
                    .table(Stacks::Table)
                    .add_column(schema::big_integer(Stacks::DefinitionVersion).default(1))
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .alter_table(
                Table::alter()
                    .table(Stacks::Table)
                    .drop_column(Stacks::DefinitionVersion)
                    .to_owned(),
            )
            .await
    }
}
