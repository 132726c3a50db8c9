//! Durable deadlines and delivery retries on pending lifecycle actions
//! (resolution, claim columns, next attempt), the embedded queue and the
//! lifecycle-hook events.

use ember_runtime::migration;
use sea_orm_migration::prelude::*;
use sea_orm_migration::schema;

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
        migration::add_columns(
            manager,
            T::Table,
            [
                schema::integer(T::TimeoutSecs).default(300).to_owned(),
                schema::string_len_null(T::Resolution, 16),
                schema::timestamp_with_time_zone_null(T::ResolvedAt),
                schema::string_len_null(T::ResolvedBy, 255),
                schema::timestamp_with_time_zone_null(T::NextAttemptAt),
                schema::timestamp_with_time_zone_null(T::FireClaimedUntil),
            ],
        )
        .await?;
        manager
            .create_table(
                Table::create()
                    .table(LifecycleQueueMessages::Table)
                    .if_not_exists()
                    .col(schema::big_pk_auto(LifecycleQueueMessages::Id))
                    .col(schema::string_len(LifecycleQueueMessages::Queue, 64))
                    .col(schema::uuid_uniq(LifecycleQueueMessages::Token))
                    .col(schema::text(LifecycleQueueMessages::Body))
                    .col(schema::timestamp_with_time_zone(
                        LifecycleQueueMessages::CreatedAt,
                    ))
                    .to_owned(),
            )
            .await?;
        manager
            .create_table(
                Table::create()
                    .table(LifecycleHookEvents::Table)
                    .if_not_exists()
                    .col(schema::pk_uuid(LifecycleHookEvents::Id))
                    .col(schema::uuid(LifecycleHookEvents::Token))
                    .col(schema::uuid(LifecycleHookEvents::ClusterId))
                    .col(schema::uuid(LifecycleHookEvents::NodeId))
                    .col(schema::string_len(LifecycleHookEvents::ProjectId, 64))
                    .col(schema::string_len(LifecycleHookEvents::Kind, 32))
                    .col(schema::text(LifecycleHookEvents::Detail))
                    .col(schema::timestamp_with_time_zone(
                        LifecycleHookEvents::CreatedAt,
                    ))
                    .to_owned(),
            )
            .await?;
        migration::create_index(
            manager,
            "lifecycle_queue_messages_by_queue",
            LifecycleQueueMessages::Table,
            [LifecycleQueueMessages::Queue, LifecycleQueueMessages::Id],
        )
        .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        migration::drop_tables(
            manager,
            [
                LifecycleHookEvents::Table.into_iden(),
                LifecycleQueueMessages::Table.into_iden(),
            ],
        )
        .await
    }
}
