//! Queues belong to a project: every embedded-queue message records the
//! project of its lifecycle action (backfilled from the action for
//! messages queued before), and messages are read by project and queue.

use sea_orm_migration::prelude::*;

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
enum LifecycleQueueMessages {
    Table,
    ProjectId,
    Queue,
    Id,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .alter_table(
                Table::alter()
                    .table(LifecycleQueueMessages::Table)
                    .add_column(
                        ColumnDef::new(LifecycleQueueMessages::ProjectId)
                            .string_len(64)
                            .not_null()
                            .default(""),
                    )
                    .to_owned(),
            )
            .await?;
        manager
            .get_connection()
            .execute_unprepared(
                "UPDATE lifecycle_queue_messages SET project_id = COALESCE((SELECT p.project_id \
                 FROM pending_lifecycle_actions p WHERE p.token = lifecycle_queue_messages.token), '')",
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name("lifecycle_queue_messages_by_project_queue")
                    .table(LifecycleQueueMessages::Table)
                    .col(LifecycleQueueMessages::ProjectId)
                    .col(LifecycleQueueMessages::Queue)
                    .col(LifecycleQueueMessages::Id)
                    .if_not_exists()
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .drop_index(
                Index::drop()
                    .name("lifecycle_queue_messages_by_project_queue")
                    .table(LifecycleQueueMessages::Table)
                    .to_owned(),
            )
            .await?;
        manager
            .alter_table(
                Table::alter()
                    .table(LifecycleQueueMessages::Table)
                    .drop_column(LifecycleQueueMessages::ProjectId)
                    .to_owned(),
            )
            .await
    }
}
