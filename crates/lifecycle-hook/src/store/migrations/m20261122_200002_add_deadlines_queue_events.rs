//! Durable deadlines and delivery retries on pending lifecycle actions
//! (resolution, claim columns, next attempt), the embedded queue and the
//! lifecycle-hook events.

use sea_orm_migration::prelude::*;

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
enum PendingLifecycleActions {
    Table,
    TimeoutSecs,
    Resolution,
    ResolvedAt,
    ResolvedBy,
    NextAttemptAt,
    FireClaimedUntil,
}

#[derive(DeriveIden)]
enum LifecycleQueueMessages {
    Table,
    Id,
    Queue,
    Token,
    Body,
    CreatedAt,
}

#[derive(DeriveIden)]
enum LifecycleHookEvents {
    Table,
    Id,
    Token,
    ClusterId,
    NodeId,
    ProjectId,
    Kind,
    Detail,
    CreatedAt,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        use PendingLifecycleActions as T;
        // SQLite takes one column per ALTER TABLE.
        let columns = [
            ColumnDef::new(T::TimeoutSecs)
                .integer()
                .not_null()
                .default(300)
                .to_owned(),
            ColumnDef::new(T::Resolution)
                .string_len(16)
                .null()
                .to_owned(),
            ColumnDef::new(T::ResolvedAt)
                .timestamp_with_time_zone()
                .null()
                .to_owned(),
            ColumnDef::new(T::ResolvedBy)
                .string_len(255)
                .null()
                .to_owned(),
            ColumnDef::new(T::NextAttemptAt)
                .timestamp_with_time_zone()
                .null()
                .to_owned(),
            ColumnDef::new(T::FireClaimedUntil)
                .timestamp_with_time_zone()
                .null()
                .to_owned(),
        ];
        for mut column in columns {
            manager
                .alter_table(
                    Table::alter()
                        .table(T::Table)
                        .add_column(&mut column)
                        .to_owned(),
                )
                .await?;
        }
        manager
            .create_table(
                Table::create()
                    .table(LifecycleQueueMessages::Table)
                    .if_not_exists()
                    .col(
                        ColumnDef::new(LifecycleQueueMessages::Id)
                            .big_integer()
                            .not_null()
                            .auto_increment()
                            .primary_key(),
                    )
                    .col(
                        ColumnDef::new(LifecycleQueueMessages::Queue)
                            .string_len(64)
                            .not_null(),
                    )
                    .col(
                        ColumnDef::new(LifecycleQueueMessages::Token)
                            .uuid()
                            .not_null()
                            .unique_key(),
                    )
                    .col(
                        ColumnDef::new(LifecycleQueueMessages::Body)
                            .text()
                            .not_null(),
                    )
                    .col(
                        ColumnDef::new(LifecycleQueueMessages::CreatedAt)
                            .timestamp_with_time_zone()
                            .not_null(),
                    )
                    .to_owned(),
            )
            .await?;
        manager
            .create_table(
                Table::create()
                    .table(LifecycleHookEvents::Table)
                    .if_not_exists()
                    .col(
                        ColumnDef::new(LifecycleHookEvents::Id)
                            .uuid()
                            .not_null()
                            .primary_key(),
                    )
                    .col(ColumnDef::new(LifecycleHookEvents::Token).uuid().not_null())
                    .col(
                        ColumnDef::new(LifecycleHookEvents::ClusterId)
                            .uuid()
                            .not_null(),
                    )
                    .col(
                        ColumnDef::new(LifecycleHookEvents::NodeId)
                            .uuid()
                            .not_null(),
                    )
                    .col(
                        ColumnDef::new(LifecycleHookEvents::ProjectId)
                            .string_len(64)
                            .not_null(),
                    )
                    .col(
                        ColumnDef::new(LifecycleHookEvents::Kind)
                            .string_len(32)
                            .not_null(),
                    )
                    .col(
                        ColumnDef::new(LifecycleHookEvents::Detail)
                            .text()
                            .not_null(),
                    )
                    .col(
                        ColumnDef::new(LifecycleHookEvents::CreatedAt)
                            .timestamp_with_time_zone()
                            .not_null(),
                    )
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name("lifecycle_queue_messages_by_queue")
                    .table(LifecycleQueueMessages::Table)
                    .col(LifecycleQueueMessages::Queue)
                    .col(LifecycleQueueMessages::Id)
                    .if_not_exists()
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .drop_table(Table::drop().table(LifecycleHookEvents::Table).to_owned())
            .await?;
        manager
            .drop_table(
                Table::drop()
                    .table(LifecycleQueueMessages::Table)
                    .to_owned(),
            )
            .await
    }
}
