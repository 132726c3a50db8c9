//! The queues of message receivers (Senlin's Zaqar queues, kept by Ember):
//! one row per message posted to `senlin-receiver-<receiver id>`, until it
//! runs, is dropped, expires or its receiver is deleted. `claim_token` and
//! `claimed_until` are the lease of the claim running it (a fresh token per
//! claim, which the delete after the run must present), so replicas
//! sharing a database never run one message at the same time.

use ember_runtime::migration;
use sea_orm_migration::prelude::*;
use sea_orm_migration::schema;

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
enum ReceiverMessages {
    Table,
    Id,
    ReceiverId,
    ProjectId,
    Body,
    PostedAt,
    ExpiresAt,
    ClaimToken,
    ClaimedUntil,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .create_table(
                Table::create()
                    .table(ReceiverMessages::Table)
                    .if_not_exists()
                    .col(schema::string_len(ReceiverMessages::Id, 36).primary_key())
                    .col(schema::string_len(ReceiverMessages::ReceiverId, 36))
                    .col(schema::string_len(ReceiverMessages::ProjectId, 64))
                    .col(schema::text(ReceiverMessages::Body))
                    .col(schema::timestamp_with_time_zone(ReceiverMessages::PostedAt))
                    .col(schema::timestamp_with_time_zone(
                        ReceiverMessages::ExpiresAt,
                    ))
                    .col(schema::string_len_null(ReceiverMessages::ClaimToken, 36))
                    .col(schema::timestamp_with_time_zone_null(
                        ReceiverMessages::ClaimedUntil,
                    ))
                    .to_owned(),
            )
            .await?;
        migration::create_index(
            manager,
            "receiver_messages_queue",
            ReceiverMessages::Table,
            [ReceiverMessages::ReceiverId, ReceiverMessages::PostedAt],
        )
        .await?;
        migration::create_index(
            manager,
            "receiver_messages_pending",
            ReceiverMessages::Table,
            [ReceiverMessages::PostedAt, ReceiverMessages::Id],
        )
        .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        migration::drop_tables(manager, [ReceiverMessages::Table]).await
    }
}
