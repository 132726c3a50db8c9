//! The clustering tables (Senlin's model): profiles, clusters, nodes,
//! policies and their bindings, durable actions (claimed by one conditional
//! update, leased to one engine) and events.

use ember_runtime::migration;
use sea_orm_migration::prelude::*;
use sea_orm_migration::schema;

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
enum ClusterProfiles {
    Table,
    Id,
    Name,
    TypeName,
    Spec,
    Metadata,
    ProjectId,
    UserId,
    CreatedAt,
}

#[derive(DeriveIden)]
enum Clusters {
    Table,
    Id,
    Name,
    ProfileId,
    MinSize,
    MaxSize,
    DesiredCapacity,
    Status,
    StatusReason,
    Metadata,
    NextIndex,
    ProjectId,
    UserId,
    CreatedAt,
    UpdatedAt,
}

#[derive(DeriveIden)]
enum ClusterNodes {
    Table,
    Id,
    Name,
    ClusterId,
    ProfileId,
    NodeIndex,
    Role,
    Status,
    StatusReason,
    PhysicalId,
    Tainted,
    Metadata,
    ProjectId,
    UserId,
    CreatedAt,
    UpdatedAt,
}

#[derive(DeriveIden)]
enum ClusterPolicies {
    Table,
    Id,
    Name,
    TypeName,
    Spec,
    ProjectId,
    UserId,
    CreatedAt,
}

#[derive(DeriveIden)]
enum ClusterPolicyBindings {
    Table,
    ClusterId,
    PolicyId,
    Priority,
    Enabled,
}

#[derive(DeriveIden)]
enum ClusterActions {
    Table,
    Id,
    Name,
    Kind,
    TargetId,
    ClusterId,
    Status,
    StatusReason,
    Inputs,
    Outputs,
    DependsOn,
    DependedBy,
    Owner,
    LeaseExpiresAt,
    LifecycleOutcome,
    LifecycleDetail,
    HookRecorded,
    ProjectId,
    UserId,
    Roles,
    CreatedAt,
    UpdatedAt,
}

#[derive(DeriveIden)]
enum ClusterEvents {
    Table,
    Id,
    GeneratedAt,
    ObjId,
    ObjType,
    ObjName,
    ClusterId,
    Action,
    Status,
    StatusReason,
    Level,
    ProjectId,
    UserId,
}

fn id<T: IntoIden>(column: T) -> ColumnDef {
    schema::pk_uuid(column)
}

fn text<T: IntoIden>(column: T, length: u32) -> ColumnDef {
    schema::string_len(column, length)
}

fn time<T: IntoIden>(column: T) -> ColumnDef {
    schema::timestamp_with_time_zone(column)
}

fn json<T: IntoIden>(column: T) -> ColumnDef {
    schema::json(column)
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        use ClusterActions as A;
        use ClusterEvents as E;
        use ClusterNodes as N;
        use ClusterPolicies as P;
        use ClusterPolicyBindings as B;
        use ClusterProfiles as R;
        use Clusters as C;
        let tables = [
            Table::create()
                .table(R::Table)
                .if_not_exists()
                .col(id(R::Id))
                .col(text(R::Name, 255))
                .col(text(R::TypeName, 64))
                .col(json(R::Spec))
                .col(json(R::Metadata))
                .col(text(R::ProjectId, 64))
                .col(text(R::UserId, 64))
                .col(time(R::CreatedAt))
                .to_owned(),
            Table::create()
                .table(C::Table)
                .if_not_exists()
                .col(id(C::Id))
                .col(text(C::Name, 255))
                .col(schema::uuid(C::ProfileId))
                .col(schema::integer(C::MinSize))
                .col(schema::integer(C::MaxSize))
                .col(schema::integer(C::DesiredCapacity))
                .col(text(C::Status, 16))
                .col(schema::text(C::StatusReason))
                .col(json(C::Metadata))
                .col(schema::integer(C::NextIndex))
                .col(text(C::ProjectId, 64))
                .col(text(C::UserId, 64))
                .col(time(C::CreatedAt))
                .col(time(C::UpdatedAt))
                .to_owned(),
            Table::create()
                .table(N::Table)
                .if_not_exists()
                .col(id(N::Id))
                .col(text(N::Name, 255))
                .col(schema::uuid_null(N::ClusterId))
                .col(schema::uuid(N::ProfileId))
                .col(schema::integer(N::NodeIndex))
                .col(text(N::Role, 64))
                .col(text(N::Status, 16))
                .col(schema::text(N::StatusReason))
                .col(schema::string_len_null(N::PhysicalId, 64))
                .col(schema::boolean(N::Tainted).default(false))
                .col(json(N::Metadata))
                .col(text(N::ProjectId, 64))
                .col(text(N::UserId, 64))
                .col(time(N::CreatedAt))
                .col(time(N::UpdatedAt))
                .to_owned(),
            Table::create()
                .table(P::Table)
                .if_not_exists()
                .col(id(P::Id))
                .col(text(P::Name, 255))
                .col(text(P::TypeName, 64))
                .col(json(P::Spec))
                .col(text(P::ProjectId, 64))
                .col(text(P::UserId, 64))
                .col(time(P::CreatedAt))
                .to_owned(),
            Table::create()
                .table(B::Table)
                .if_not_exists()
                .col(schema::uuid(B::ClusterId))
                .col(schema::uuid(B::PolicyId))
                .col(schema::integer(B::Priority))
                .col(schema::boolean(B::Enabled))
                .primary_key(Index::create().col(B::ClusterId).col(B::PolicyId))
                .to_owned(),
            Table::create()
                .table(A::Table)
                .if_not_exists()
                .col(id(A::Id))
                .col(text(A::Name, 255))
                .col(text(A::Kind, 32))
                .col(schema::uuid(A::TargetId))
                .col(schema::uuid_null(A::ClusterId))
                .col(text(A::Status, 32))
                .col(schema::text(A::StatusReason))
                .col(json(A::Inputs))
                .col(json(A::Outputs))
                .col(json(A::DependsOn))
                .col(json(A::DependedBy))
                .col(schema::uuid_null(A::Owner))
                .col(schema::timestamp_with_time_zone_null(A::LeaseExpiresAt))
                .col(schema::string_len_null(A::LifecycleOutcome, 16))
                .col(schema::text(A::LifecycleDetail))
                .col(schema::boolean(A::HookRecorded).default(false))
                .col(text(A::ProjectId, 64))
                .col(text(A::UserId, 64))
                .col(schema::text(A::Roles))
                .col(time(A::CreatedAt))
                .col(time(A::UpdatedAt))
                .to_owned(),
            Table::create()
                .table(E::Table)
                .if_not_exists()
                .col(id(E::Id))
                .col(time(E::GeneratedAt))
                .col(text(E::ObjId, 64))
                .col(text(E::ObjType, 32))
                .col(text(E::ObjName, 255))
                .col(schema::uuid_null(E::ClusterId))
                .col(text(E::Action, 64))
                .col(text(E::Status, 32))
                .col(schema::text(E::StatusReason))
                .col(text(E::Level, 16))
                .col(text(E::ProjectId, 64))
                .col(text(E::UserId, 64))
                .to_owned(),
        ];
        for table in tables {
            manager.create_table(table).await?;
        }
        migration::create_index(
            manager,
            "cluster_nodes_by_cluster",
            N::Table,
            [N::ClusterId, N::NodeIndex],
        )
        .await?;
        // The dispatcher looks for READY actions, the sweeper for expired
        // leases: both by status.
        migration::create_index(
            manager,
            "cluster_actions_by_status",
            A::Table,
            [A::Status, A::CreatedAt],
        )
        .await?;
        migration::create_index(
            manager,
            "cluster_actions_by_cluster",
            A::Table,
            [A::ClusterId, A::CreatedAt],
        )
        .await?;
        migration::create_index(
            manager,
            "cluster_events_by_cluster",
            E::Table,
            [E::ClusterId, E::GeneratedAt],
        )
        .await?;
        migration::create_index(
            manager,
            "clusters_by_project",
            C::Table,
            [C::ProjectId, C::Name],
        )
        .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        migration::drop_tables(
            manager,
            [
                ClusterEvents::Table.into_iden(),
                ClusterActions::Table.into_iden(),
                ClusterPolicyBindings::Table.into_iden(),
                ClusterPolicies::Table.into_iden(),
                ClusterNodes::Table.into_iden(),
                Clusters::Table.into_iden(),
                ClusterProfiles::Table.into_iden(),
            ],
        )
        .await
    }
}
