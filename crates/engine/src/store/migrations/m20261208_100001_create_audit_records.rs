//! The audit trail (see `domain::audit`): one row per lock, unlock,
//! refusal, expiry and break-glass, never changed once written. Read by
//! project and by target, newest first (ids are time-ordered UUIDv7), and
//! purged by age.

use sea_orm_migration::prelude::*;
use sea_orm_migration::schema;

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
enum AuditRecords {
    Table,
    Id,
    At,
    ProjectId,
    UserId,
    Target,
    TargetId,
    TargetName,
    Operation,
    Outcome,
    Reason,
    Blocker,
    RequestId,
}

const BY_PROJECT: &str = "idx_audit_records_project";
const BY_TARGET: &str = "idx_audit_records_target";
const BY_TIME: &str = "idx_audit_records_at";

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .create_table(
                Table::create()
                    .table(AuditRecords::Table)
                    .if_not_exists()
                    .col(schema::uuid(AuditRecords::Id).primary_key())
                    .col(schema::timestamp_with_time_zone(AuditRecords::At))
                    .col(schema::string_len(AuditRecords::ProjectId, 64))
                    .col(schema::string_len(AuditRecords::UserId, 64))
                    .col(schema::string_len(AuditRecords::Target, 16))
                    .col(schema::string_len(AuditRecords::TargetId, 64))
                    .col(schema::string_len(AuditRecords::TargetName, 255))
                    .col(schema::string_len(AuditRecords::Operation, 64))
                    .col(schema::string_len(AuditRecords::Outcome, 16))
                    .col(schema::text(AuditRecords::Reason))
                    .col(schema::text(AuditRecords::Blocker))
                    .col(schema::string_len(AuditRecords::RequestId, 128))
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name(BY_PROJECT)
                    .table(AuditRecords::Table)
                    .col(AuditRecords::ProjectId)
                    .col(AuditRecords::Id)
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name(BY_TARGET)
                    .table(AuditRecords::Table)
                    .col(AuditRecords::TargetId)
                    .col(AuditRecords::Id)
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name(BY_TIME)
                    .table(AuditRecords::Table)
                    .col(AuditRecords::At)
                    .to_owned(),
            )
            .await?;
        Ok(())
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .drop_table(Table::drop().table(AuditRecords::Table).to_owned())
            .await
    }
}
