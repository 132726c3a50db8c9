//! The definition a running update (or its rollback) moves away from, kept
//! beside the stack while the operation runs: what a resumed update rolls
//! back to, and the graph a resumed one retires removed resources by.

use ember_runtime::migration;
use sea_orm_migration::prelude::*;
use sea_orm_migration::schema;

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
enum StackUpdateOrigins {
    Table,
    StackId,
    Template,
    Environment,
    Files,
    Parameters,
    RecordedAt,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .create_table(
                Table::create()
                    .table(StackUpdateOrigins::Table)
                    .if_not_exists()
                    .col(schema::pk_uuid(StackUpdateOrigins::StackId))
                    .col(schema::json(StackUpdateOrigins::Template))
                    .col(schema::json(StackUpdateOrigins::Environment))
                    .col(schema::json(StackUpdateOrigins::Files))
                    .col(schema::json(StackUpdateOrigins::Parameters))
                    .col(schema::timestamp_with_time_zone(
                        StackUpdateOrigins::RecordedAt,
                    ))
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        migration::drop_tables(manager, [StackUpdateOrigins::Table]).await
    }
}
