//! Where a cloud places an instance's machine (networks, security groups,
//! key pair, block devices, scheduler hints: the openstack backend) and the
//! delegation its driver acts through. NULL = none, so existing rows need
//! no default.

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
        // One column per statement: SQLite alters one at a time.
        for column in [
            schema::json_null(Instances::Placement),
            schema::json_null(Instances::Delegation),
        ] {
            manager
                .alter_table(
                    Table::alter()
                        .table(Instances::Table)
                        .add_column_if_not_exists(column)
                        .to_owned(),
                )
                .await?;
        }
        Ok(())
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        for column in [Instances::Placement, Instances::Delegation] {
            manager
                .alter_table(
                    Table::alter()
                        .table(Instances::Table)
                        .drop_column(column)
                        .to_owned(),
                )
                .await?;
        }
        Ok(())
    }
}
