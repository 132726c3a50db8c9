use ember_runtime::migration;
use sea_orm_migration::prelude::*;
use sea_orm_migration::schema;

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
enum PendingLifecycleActions {
    Table,
    Token,
    NodeId,
    ResourceId,
    ClusterId,
    ProjectId,
    TargetType,
    TargetAddress,
    Deadline,
    DeliveryState,
    DeliveryAttempts,
    LastError,
    DeliveredAt,
    CreatedAt,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        use PendingLifecycleActions as T;
        manager
            .create_table(
                Table::create()
                    .table(T::Table)
                    .if_not_exists()
                    .col(schema::pk_uuid(T::Token))
                    .col(schema::uuid(T::NodeId))
                    .col(schema::string_len(T::ResourceId, 255))
                    .col(schema::uuid(T::ClusterId))
                    .col(schema::string_len(T::ProjectId, 64))
                    .col(schema::string_len(T::TargetType, 16))
                    .col(schema::text(T::TargetAddress))
                    .col(schema::timestamp_with_time_zone(T::Deadline))
                    .col(schema::string_len(T::DeliveryState, 16))
                    .col(schema::integer(T::DeliveryAttempts))
                    .col(schema::text_null(T::LastError))
                    .col(schema::timestamp_with_time_zone_null(T::DeliveredAt))
                    .col(schema::timestamp_with_time_zone(T::CreatedAt))
                    .to_owned(),
            )
            .await?;
        // The deadline sweeper and ListPending both read earliest first.
        migration::create_index(
            manager,
            "pending_lifecycle_actions_by_deadline",
            T::Table,
            [T::Deadline, T::Token],
        )
        .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        migration::drop_tables(manager, [PendingLifecycleActions::Table]).await
    }
}
