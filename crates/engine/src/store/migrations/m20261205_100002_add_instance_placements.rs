//! Where a cloud places an instance's machine (networks, security groups,
//! key pair, block devices, scheduler hints: the openstack backend) and the
//! delegation its driver acts through. NULL = none, so existing rows need
//! no default.

use ember_runtime::migration;
use sea_orm_migration::prelude::*;
use sea_orm_migration::schema;

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
enum Instances {
    Table,
    Placement,
    Delegation,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        migration::add_missing_columns(
            manager,
            Instances::Table,
            [
                schema::json_null(Instances::Placement),
                schema::json_null(Instances::Delegation),
            ],
        )
        .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        migration::drop_columns(
            manager,
            Instances::Table,
            [Instances::Placement, Instances::Delegation],
        )
        .await
    }
}
