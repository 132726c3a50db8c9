//! Circuit breakers and observe mode: each plug-in's settings (how many
//! consecutive failures open its circuit, for how long, and whether its
//! verdicts are enforced), and `plugin_circuits`, the failures and circuit
//! of each plug-in that failed lately — shared by every replica. A
//! plug-in whose calls all answer has no row there.

use sea_orm_migration::prelude::*;

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
        // The defaults are those of a registration that names none. One
        // column per statement: SQLite alters one at a time.
        for column in [
            ColumnDef::new(Plugins::Enforce)
                .boolean()
                .not_null()
                .default(true)
                .to_owned(),
            ColumnDef::new(Plugins::BreakerFailures)
                .integer()
                .not_null()
                .default(5)
                .to_owned(),
            ColumnDef::new(Plugins::BreakerCooldownMs)
                .big_integer()
                .not_null()
                .default(30_000)
                .to_owned(),
        ] {
            manager
                .alter_table(
                    Table::alter()
                        .table(Plugins::Table)
                        .add_column(column)
                        .to_owned(),
                )
                .await?;
        }
        manager
            .create_table(
                Table::create()
                    .table(PluginCircuits::Table)
                    .if_not_exists()
                    .col(
                        ColumnDef::new(PluginCircuits::Name)
                            .string_len(64)
                            .not_null()
                            .primary_key(),
                    )
                    .col(
                        ColumnDef::new(PluginCircuits::ConsecutiveFailures)
                            .big_integer()
                            .not_null(),
                    )
                    .col(ColumnDef::new(PluginCircuits::OpenedAt).timestamp_with_time_zone())
                    .col(ColumnDef::new(PluginCircuits::OpenUntil).timestamp_with_time_zone())
                    .col(ColumnDef::new(PluginCircuits::ProbeUntil).timestamp_with_time_zone())
                    .col(
                        ColumnDef::new(PluginCircuits::LastFailure)
                            .text()
                            .not_null(),
                    )
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .drop_table(Table::drop().table(PluginCircuits::Table).to_owned())
            .await?;
        for column in [
            Plugins::Enforce,
            Plugins::BreakerFailures,
            Plugins::BreakerCooldownMs,
        ] {
            manager
                .alter_table(
                    Table::alter()
                        .table(Plugins::Table)
                        .drop_column(column)
                        .to_owned(),
                )
                .await?;
        }
        Ok(())
    }
}
