//! The clustering tables (Senlin's model): profiles, clusters, nodes,
//! policies and their bindings, durable actions (claimed by one conditional
//! update, leased to one engine) and events.

use sea_orm_migration::prelude::*;

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
    ColumnDef::new(column)
        .uuid()
        .not_null()
        .primary_key()
        .to_owned()
}

fn text<T: IntoIden>(column: T, length: u32) -> ColumnDef {
    ColumnDef::new(column)
        .string_len(length)
        .not_null()
        .to_owned()
}

fn time<T: IntoIden>(column: T) -> ColumnDef {
    ColumnDef::new(column)
        .timestamp_with_time_zone()
        .not_null()
        .to_owned()
}

fn json<T: IntoIden>(column: T) -> ColumnDef {
    ColumnDef::new(column).json().not_null().to_owned()
}

fn index<T: IntoIden + 'static>(name: &str, table: T, columns: Vec<T>) -> IndexCreateStatement {
    let mut index = Index::create();
    index.name(name).table(table).if_not_exists();
    for column in columns {
        index.col(column);
    }
    index.to_owned()
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
                .col(ColumnDef::new(C::ProfileId).uuid().not_null())
                .col(ColumnDef::new(C::MinSize).integer().not_null())
                .col(ColumnDef::new(C::MaxSize).integer().not_null())
                .col(ColumnDef::new(C::DesiredCapacity).integer().not_null())
                .col(text(C::Status, 16))
                .col(ColumnDef::new(C::StatusReason).text().not_null())
                .col(json(C::Metadata))
                .col(ColumnDef::new(C::NextIndex).integer().not_null())
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
                .col(ColumnDef::new(N::ClusterId).uuid().null())
                .col(ColumnDef::new(N::ProfileId).uuid().not_null())
                .col(ColumnDef::new(N::NodeIndex).integer().not_null())
                .col(text(N::Role, 64))
                .col(text(N::Status, 16))
                .col(ColumnDef::new(N::StatusReason).text().not_null())
                .col(ColumnDef::new(N::PhysicalId).string_len(64).null())
                .col(
                    ColumnDef::new(N::Tainted)
                        .boolean()
                        .not_null()
                        .default(false),
                )
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
                .col(ColumnDef::new(B::ClusterId).uuid().not_null())
                .col(ColumnDef::new(B::PolicyId).uuid().not_null())
                .col(ColumnDef::new(B::Priority).integer().not_null())
                .col(ColumnDef::new(B::Enabled).boolean().not_null())
                .primary_key(Index::create().col(B::ClusterId).col(B::PolicyId))
                .to_owned(),
            Table::create()
                .table(A::Table)
                .if_not_exists()
                .col(id(A::Id))
                .col(text(A::Name, 255))
                .col(text(A::Kind, 32))
                .col(ColumnDef::new(A::TargetId).uuid().not_null())
                .col(ColumnDef::new(A::ClusterId).uuid().null())
                .col(text(A::Status, 32))
                .col(ColumnDef::new(A::StatusReason).text().not_null())
                .col(json(A::Inputs))
                .col(json(A::Outputs))
                .col(json(A::DependsOn))
                .col(json(A::DependedBy))
                .col(ColumnDef::new(A::Owner).uuid().null())
                .col(
                    ColumnDef::new(A::LeaseExpiresAt)
                        .timestamp_with_time_zone()
                        .null(),
                )
                .col(ColumnDef::new(A::LifecycleOutcome).string_len(16).null())
                .col(ColumnDef::new(A::LifecycleDetail).text().not_null())
                .col(
                    ColumnDef::new(A::HookRecorded)
                        .boolean()
                        .not_null()
                        .default(false),
                )
                .col(text(A::ProjectId, 64))
                .col(text(A::UserId, 64))
                .col(ColumnDef::new(A::Roles).text().not_null())
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
                .col(ColumnDef::new(E::ClusterId).uuid().null())
                .col(text(E::Action, 64))
                .col(text(E::Status, 32))
                .col(ColumnDef::new(E::StatusReason).text().not_null())
                .col(text(E::Level, 16))
                .col(text(E::ProjectId, 64))
                .col(text(E::UserId, 64))
                .to_owned(),
        ];
        for table in tables {
            manager.create_table(table).await?;
        }
        let indexes = [index(
            "cluster_nodes_by_cluster",
            N::Table,
            vec![N::ClusterId, N::NodeIndex],
        )];
        for statement in indexes {
            manager.create_index(statement).await?;
        }
        // The dispatcher looks for READY actions, the sweeper for expired
        // leases: both by status.
        manager
            .create_index(index(
                "cluster_actions_by_status",
                A::Table,
                vec![A::Status, A::CreatedAt],
            ))
            .await?;
        manager
            .create_index(index(
                "cluster_actions_by_cluster",
                A::Table,
                vec![A::ClusterId, A::CreatedAt],
            ))
            .await?;
        manager
            .create_index(index(
                "cluster_events_by_cluster",
                E::Table,
                vec![E::ClusterId, E::GeneratedAt],
            ))
            .await?;
        manager
            .create_index(index(
                "clusters_by_project",
                C::Table,
                vec![C::ProjectId, C::Name],
            ))
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        for table in [
            ClusterEvents::Table.into_iden(),
            ClusterActions::Table.into_iden(),
            ClusterPolicyBindings::Table.into_iden(),
            ClusterPolicies::Table.into_iden(),
            ClusterNodes::Table.into_iden(),
            Clusters::Table.into_iden(),
            ClusterProfiles::Table.into_iden(),
        ] {
            manager
                .drop_table(Table::drop().table(table).to_owned())
                .await?;
        }
        Ok(())
    }
}
