//! The steps every service's migrations repeat: columns added and dropped
//! (one statement a column: SQLite alters one at a time), indexes made
//! and dropped by name, a column added with its index, tables dropped. A
//! migration says which table, columns and index; these say how, once.

use sea_orm_migration::prelude::*;

/// Adds `columns` to `table`, in their order, one statement each.
pub async fn add_columns(
    manager: &SchemaManager<'_>,
    table: impl IntoIden,
    columns: impl IntoIterator<Item = ColumnDef>,
) -> Result<(), DbErr> {
    alter_columns(manager, table, columns, |alter, column| {
        alter.add_column(column);
    })
    .await
}

/// Adds those of `columns` that `table` lacks (PostgreSQL skips the
/// others; SQLite has no such clause and adds them all).
pub async fn add_missing_columns(
    manager: &SchemaManager<'_>,
    table: impl IntoIden,
    columns: impl IntoIterator<Item = ColumnDef>,
) -> Result<(), DbErr> {
    alter_columns(manager, table, columns, |alter, column| {
        alter.add_column_if_not_exists(column);
    })
    .await
}

/// One ALTER TABLE a column, the column added to it by `add`.
async fn alter_columns(
    manager: &SchemaManager<'_>,
    table: impl IntoIden,
    columns: impl IntoIterator<Item = ColumnDef>,
    add: impl Fn(&mut TableAlterStatement, ColumnDef),
) -> Result<(), DbErr> {
    let table = table.into_iden();
    for column in columns {
        let mut alter = Table::alter();
        alter.table(table.clone());
        add(&mut alter, column);
        manager.alter_table(alter).await?;
    }
    Ok(())
}

/// Drops `columns` from `table`, in their order, one statement each.
pub async fn drop_columns<C: IntoIden>(
    manager: &SchemaManager<'_>,
    table: impl IntoIden,
    columns: impl IntoIterator<Item = C>,
) -> Result<(), DbErr> {
    let table = table.into_iden();
    for column in columns {
        manager
            .alter_table(
                Table::alter()
                    .table(table.clone())
                    .drop_column(column)
                    .to_owned(),
            )
            .await?;
    }
    Ok(())
}

/// Makes the index `name` on `table` over `columns` (in their order),
/// unless it is there already.
pub async fn create_index<C: IntoIndexColumn>(
    manager: &SchemaManager<'_>,
    name: &str,
    table: impl IntoIden,
    columns: impl IntoIterator<Item = C>,
) -> Result<(), DbErr> {
    manager.create_index(index(name, table, columns)).await
}

/// [`create_index`] for an index that refuses two rows with the same
/// values in `columns`.
pub async fn create_unique_index<C: IntoIndexColumn>(
    manager: &SchemaManager<'_>,
    name: &str,
    table: impl IntoIden,
    columns: impl IntoIterator<Item = C>,
) -> Result<(), DbErr> {
    manager
        .create_index(index(name, table, columns).unique().to_owned())
        .await
}

/// The statement behind [`create_index`] and [`create_unique_index`].
fn index<C: IntoIndexColumn>(
    name: &str,
    table: impl IntoIden,
    columns: impl IntoIterator<Item = C>,
) -> IndexCreateStatement {
    let mut index = Index::create();
    index.name(name).table(table.into_iden()).if_not_exists();
    for column in columns {
        index.col(column);
    }
    index
}

/// Drops the index `name` of `table`.
pub async fn drop_index(
    manager: &SchemaManager<'_>,
    name: &str,
    table: impl IntoIden,
) -> Result<(), DbErr> {
    manager
        .drop_index(Index::drop().name(name).table(table.into_iden()).to_owned())
        .await
}

/// Adds `column` to `table`, then the index `name` over it alone.
pub async fn add_indexed_column(
    manager: &SchemaManager<'_>,
    name: &str,
    table: impl IntoIden,
    column: ColumnDef,
) -> Result<(), DbErr> {
    let table = table.into_iden();
    let indexed = Alias::new(column.get_column_name());
    add_columns(manager, table.clone(), [column]).await?;
    create_index(manager, name, table, [indexed]).await
}

/// Undoes [`add_indexed_column`]: the index `name`, then `column`.
pub async fn drop_indexed_column(
    manager: &SchemaManager<'_>,
    name: &str,
    table: impl IntoIden,
    column: impl IntoIden,
) -> Result<(), DbErr> {
    let table = table.into_iden();
    drop_index(manager, name, table.clone()).await?;
    drop_columns(manager, table, [column]).await
}

/// Drops `tables`, in their order (each only if it is there).
pub async fn drop_tables<T: IntoIden>(
    manager: &SchemaManager<'_>,
    tables: impl IntoIterator<Item = T>,
) -> Result<(), DbErr> {
    for table in tables {
        manager
            .drop_table(
                Table::drop()
                    .table(table.into_iden())
                    .if_exists()
                    .to_owned(),
            )
            .await?;
    }
    Ok(())
}
