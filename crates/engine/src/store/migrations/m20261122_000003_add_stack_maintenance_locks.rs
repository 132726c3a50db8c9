use sea_orm_migration::prelude::*;

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
enum Stacks {
    Table,
    LockLevel,
    LockedByUser,
    LockedByAdmin,
    LockedAt,
    LockReason,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        // The maintenance lock (spec heat-lock-stack): who, when, how far, why.
        let columns = [
            ColumnDef::new(Stacks::LockLevel)
                .string_len(16)
                .null()
                .to_owned(),
            ColumnDef::new(Stacks::LockedByUser)
                .string_len(64)
                .null()
                .to_owned(),
            ColumnDef::new(Stacks::LockedByAdmin)
                .boolean()
                .null()
                .to_owned(),
            ColumnDef::new(Stacks::LockedAt)
                .timestamp_with_time_zone()
                .null()
                .to_owned(),
            ColumnDef::new(Stacks::LockReason).text().null().to_owned(),
        ];
        for column in columns {
            manager
                .alter_table(
                    Table::alter()
                        .table(Stacks::Table)
                        .add_column(column)
                        .to_owned(),
                )
                .await?;
        }
        Ok(())
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        for column in [
            Stacks::LockLevel,
            Stacks::LockedByUser,
            Stacks::LockedByAdmin,
            Stacks::LockedAt,
            Stacks::LockReason,
        ] {
            manager
                .alter_table(
                    Table::alter()
                        .table(Stacks::Table)
                        .drop_column(column)
                        .to_owned(),
                )
                .await?;
        }
        Ok(())
    }
}
