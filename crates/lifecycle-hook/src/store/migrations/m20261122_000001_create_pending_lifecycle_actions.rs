use sea_orm_migration::prelude::*;

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
                    .col(ColumnDef::new(T::Token).uuid().not_null().primary_key())
                    .col(ColumnDef::new(T::NodeId).uuid().not_null())
                    .col(ColumnDef::new(T::ResourceId).string_len(255).not_null())
                    .col(ColumnDef::new(T::ClusterId).uuid().not_null())
                    .col(ColumnDef::new(T::ProjectId).string_len(64).not_null())
                    .col(ColumnDef::new(T::TargetType).string_len(16).not_null())
                    .col(ColumnDef::new(T::TargetAddress).text().not_null())
                    .col(
                        ColumnDef::new(T::Deadline)
                            .timestamp_with_time_zone()
                            .not_null(),
                    )
                    .col(ColumnDef::new(T::DeliveryState).string_len(16).not_null())
                    .col(ColumnDef::new(T::DeliveryAttempts).integer().not_null())
                    .col(ColumnDef::new(T::LastError).text().null())
                    .col(
                        ColumnDef::new(T::DeliveredAt)
                            .timestamp_with_time_zone()
                            .null(),
                    )
                    .col(
                        ColumnDef::new(T::CreatedAt)
                            .timestamp_with_time_zone()
                            .not_null(),
                    )
                    .to_owned(),
            )
            .await?;
        // The deadline sweeper and ListPending both read earliest first.
        manager
            .create_index(
                Index::create()
                    .name("pending_lifecycle_actions_by_deadline")
                    .table(T::Table)
                    .col(T::Deadline)
                    .col(T::Token)
                    .if_not_exists()
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .drop_table(
                Table::drop()
                    .table(PendingLifecycleActions::Table)
                    .to_owned(),
            )
            .await
    }
}
