//! Launch hooks: every pending action says which transition its node waits
//! in (`launching` or `terminating`); the actions recorded before launch
//! hooks existed were all terminating.

use ember_runtime::migration;
use sea_orm_migration::prelude::*;
use sea_orm_migration::schema;

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
enum PendingLifecycleActions {
    Table,
    TransitionType,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        migration::add_columns(
            manager,
            PendingLifecycleActions::Table,
            [
                schema::string_len(PendingLifecycleActions::TransitionType, 16)
                    .default("terminating")
                    .to_owned(),
            ],
        )
        .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        migration::drop_columns(
            manager,
            PendingLifecycleActions::Table,
            [PendingLifecycleActions::TransitionType],
        )
        .await
    }
}
