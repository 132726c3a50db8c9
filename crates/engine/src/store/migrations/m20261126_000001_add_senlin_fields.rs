//! Fields Senlin's API shows that Ember did not keep: when a profile or
//! policy was last updated, a cluster's default action timeout, and when
//! an action first started running (Senlin's `start_time`; its `end_time` is
//! when a finished action was last updated: nothing changes it after).

use sea_orm_migration::prelude::*;
use sea_orm_migration::schema;

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
enum ClusterProfiles {
    Table,
    UpdatedAt,
}

#[derive(DeriveIden)]
enum ClusterPolicies {
    Table,
    UpdatedAt,
}

#[derive(DeriveIden)]
enum Clusters {
    Table,
    Timeout,
}

#[derive(DeriveIden)]
enum ClusterActions {
    Table,
    StartedAt,
}

/// One column added per statement: SQLite's ALTER TABLE adds one at a time.
fn add(table: impl IntoIden, column: ColumnDef) -> TableAlterStatement {
    Table::alter().table(table).add_column(column).to_owned()
}

fn drop(table: impl IntoIden, column: impl IntoIden) -> TableAlterStatement {
    Table::alter().table(table).drop_column(column).to_owned()
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        let changes = [
            add(
                ClusterProfiles::Table,
                schema::timestamp_with_time_zone_null(ClusterProfiles::UpdatedAt),
            ),
            add(
                ClusterPolicies::Table,
                schema::timestamp_with_time_zone_null(ClusterPolicies::UpdatedAt),
            ),
            add(Clusters::Table, schema::integer_null(Clusters::Timeout)),
            add(
                ClusterActions::Table,
                schema::timestamp_with_time_zone_null(ClusterActions::StartedAt),
            ),
        ];
        for change in changes {
            manager.alter_table(change).await?;
        }
        Ok(())
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        let changes = [
            drop(ClusterProfiles::Table, ClusterProfiles::UpdatedAt),
            drop(ClusterPolicies::Table, ClusterPolicies::UpdatedAt),
            drop(Clusters::Table, Clusters::Timeout),
            drop(ClusterActions::Table, ClusterActions::StartedAt),
        ];
        for change in changes {
            manager.alter_table(change).await?;
        }
        Ok(())
    }
}
