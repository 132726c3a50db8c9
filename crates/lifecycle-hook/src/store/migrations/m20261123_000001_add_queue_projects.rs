//! Queues belong to a project: every embedded-queue message records the
//! project of its lifecycle action (backfilled from the action for
//! messages queued before), and messages are read by project and queue.

use ember_runtime::migration;
use sea_orm_migration::prelude::*;
use sea_orm_migration::schema;

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
enum LifecycleQueueMessages {
    Table,
    ProjectId,
    Queue,
    Id,
}

const BY_PROJECT_QUEUE: &str = "lifecycle_queue_messages_by_project_queue";

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        migration::add_columns(
            manager,
            LifecycleQueueMessages::Table,
            [schema::string_len(LifecycleQueueMessages::ProjectId, 64)
                .default("")
                .to_owned()],
        )
        .await?;
        manager
            .get_connection()
            .execute_unprepared(
                "UPDATE lifecycle_queue_messages SET project_id = COALESCE((SELECT p.project_id \
                 FROM pending_lifecycle_actions p WHERE p.token = lifecycle_queue_messages.token), '')",
            )
            .await?;
        migration::create_index(
            manager,
            BY_PROJECT_QUEUE,
            LifecycleQueueMessages::Table,
            [
                LifecycleQueueMessages::ProjectId,
                LifecycleQueueMessages::Queue,
                LifecycleQueueMessages::Id,
            ],
        )
        .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        migration::drop_index(manager, BY_PROJECT_QUEUE, LifecycleQueueMessages::Table).await?;
        migration::drop_columns(
            manager,
            LifecycleQueueMessages::Table,
            [LifecycleQueueMessages::ProjectId],
        )
        .await
    }
}
