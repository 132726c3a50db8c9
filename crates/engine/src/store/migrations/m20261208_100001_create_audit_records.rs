//! The audit trail (see `domain::audit`): one row per lock, unlock,
//! refusal, expiry and break-glass, never changed once written. Read by
//! project and by target, newest first (ids are time-ordered UUIDv7), and
//! purged by age.

use ember_runtime::migration;
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
        migration::create_index(
            manager,
            BY_PROJECT,
            AuditRecords::Table,
            [AuditRecords::ProjectId, AuditRecords::Id],
        )
        .await?;
        migration::create_index(
            manager,
            BY_TARGET,
            AuditRecords::Table,
            [AuditRecords::TargetId, AuditRecords::Id],
        )
        .await?;
        migration::create_index(manager, BY_TIME, AuditRecords::Table, [AuditRecords::At]).await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        migration::drop_tables(manager, [AuditRecords::Table]).await
    }
}
