//! Fields Senlin's API shows that Ember did not keep: when a profile or
//! policy was last updated, a cluster's default action timeout, and when
//! an action first started running (Senlin's `start_time`; its `end_time` is
//! when a finished action was last updated: nothing changes it after).

use ember_runtime::migration;
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

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        migration::add_columns(
            manager,
            ClusterProfiles::Table,
            [schema::timestamp_with_time_zone_null(
                ClusterProfiles::UpdatedAt,
            )],
        )
        .await?;
        migration::add_columns(
            manager,
            ClusterPolicies::Table,
            [schema::timestamp_with_time_zone_null(
                ClusterPolicies::UpdatedAt,
            )],
        )
        .await?;
        migration::add_columns(
            manager,
            Clusters::Table,
            [schema::integer_null(Clusters::Timeout)],
        )
        .await?;
        migration::add_columns(
            manager,
            ClusterActions::Table,
            [schema::timestamp_with_time_zone_null(
                ClusterActions::StartedAt,
            )],
        )
        .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        migration::drop_columns(
            manager,
            ClusterProfiles::Table,
            [ClusterProfiles::UpdatedAt],
        )
        .await?;
        migration::drop_columns(
            manager,
            ClusterPolicies::Table,
            [ClusterPolicies::UpdatedAt],
        )
        .await?;
        migration::drop_columns(manager, Clusters::Table, [Clusters::Timeout]).await?;
        migration::drop_columns(manager, ClusterActions::Table, [ClusterActions::StartedAt]).await
    }
}
