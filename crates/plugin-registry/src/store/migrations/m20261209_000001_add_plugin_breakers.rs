//! Circuit breakers and observe mode: each plug-in's settings (how many
//! consecutive failures open its circuit, for how long, and whether its
//! verdicts are enforced), and `plugin_circuits`, the failures and circuit
//! of each plug-in that failed lately — shared by every replica. A
//! plug-in whose calls all answer has no row there.

use ember_runtime::migration;
use sea_orm_migration::prelude::*;
use sea_orm_migration::schema;

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
enum Plugins {
    Table,
    Enforce,
    BreakerFailures,
    BreakerCooldownMs,
}

#[derive(DeriveIden)]
enum PluginCircuits {
    Table,
    Name,
    ConsecutiveFailures,
    OpenedAt,
    OpenUntil,
    ProbeUntil,
    LastFailure,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        // The defaults are those of a registration that names none.
        migration::add_columns(
            manager,
            Plugins::Table,
            [
                schema::boolean(Plugins::Enforce).default(true).to_owned(),
                schema::integer(Plugins::BreakerFailures)
                    .default(5)
                    .to_owned(),
                schema::big_integer(Plugins::BreakerCooldownMs)
                    .default(30_000)
                    .to_owned(),
            ],
        )
        .await?;
        manager
            .create_table(
                Table::create()
                    .table(PluginCircuits::Table)
                    .if_not_exists()
                    .col(schema::string_len(PluginCircuits::Name, 64).primary_key())
                    .col(schema::big_integer(PluginCircuits::ConsecutiveFailures))
                    .col(ColumnDef::new(PluginCircuits::OpenedAt).timestamp_with_time_zone())
                    .col(ColumnDef::new(PluginCircuits::OpenUntil).timestamp_with_time_zone())
                    .col(ColumnDef::new(PluginCircuits::ProbeUntil).timestamp_with_time_zone())
                    .col(schema::text(PluginCircuits::LastFailure))
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        migration::drop_tables(manager, [PluginCircuits::Table]).await?;
        migration::drop_columns(
            manager,
            Plugins::Table,
            [
                Plugins::Enforce,
                Plugins::BreakerFailures,
                Plugins::BreakerCooldownMs,
            ],
        )
        .await
    }
}
