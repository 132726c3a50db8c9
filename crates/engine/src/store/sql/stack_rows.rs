//! How a stack's row is read: the columns a [`Stack`] is read from
//! ([`LIST_COLUMNS`], never its definition's large JSON), the decoding of
//! a row of them, and the statements that find stacks — lookups by name
//! or id (their text built once), lists, children, expired locks, stacks
//! in progress — and a stack's definition, read only when a run or a
//! template read needs it.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use sea_orm::sea_query::Expr;
use sea_orm::{
    ColumnTrait, Condition, ConnectionTrait, DbErr, EntityTrait, QueryFilter, QueryOrder,
    QuerySelect,
};
use serde_json::Value;
use uuid::Uuid;

use super::super::StackListQuery;
use super::super::entity::{stack_update_origins, stacks};
use super::leases::free_generation_of_stack;
use crate::domain::{
    ActionStatus, LockLevel, MaintenanceLock, Stack, StackAction, StackDefinition,
};
use crate::error::{Error, Result};
use ember_runtime::database::Columns;

/// The columns a [`Stack`] is read from: all but what the stack is built
/// from (its template, environment, files and parameters: large JSON,
/// decoded only when a run or a template read needs them).
pub(super) const LIST_COLUMNS: [stacks::Column; 24] = [
    stacks::Column::Id,
    stacks::Column::Name,
    stacks::Column::ProjectId,
    stacks::Column::UserId,
    stacks::Column::ParentId,
    stacks::Column::Action,
    stacks::Column::Status,
    stacks::Column::StatusReason,
    stacks::Column::Description,
    stacks::Column::Tags,
    stacks::Column::TimeoutMins,
    stacks::Column::DisableRollback,
    stacks::Column::CreatedAt,
    stacks::Column::UpdatedAt,
    stacks::Column::NestedDepth,
    stacks::Column::ParentResource,
    stacks::Column::DeletedAt,
    stacks::Column::LockLevel,
    stacks::Column::LockedByUser,
    stacks::Column::LockedByAdmin,
    stacks::Column::LockedAt,
    stacks::Column::LockReason,
    stacks::Column::DefinitionVersion,
    stacks::Column::LockExpiresAt,
];

/// What a lookup by "name or id" compares: Heat's order (`identify_stack`)
/// — a UUID is first an id (a deleted stack's too), then a live stack's
/// name; anything else is a name. Two plain lookups instead of one with
/// an `OR`, which PostgreSQL answered with a bitmap scan of two indexes
/// and a plan made at every bind: most of a `GET` of one stack's cost.
#[derive(Debug, Clone, Copy)]
pub(super) enum StackKey<'a> {
    Id(Uuid),
    Name(&'a str),
}

impl<'a> StackKey<'a> {
    pub(super) fn tried_for(name_or_id: &'a str) -> impl Iterator<Item = StackKey<'a>> {
        let id = Uuid::parse_str(name_or_id).ok().map(StackKey::Id);
        id.into_iter().chain([StackKey::Name(name_or_id)])
    }
}

/// [`find_in_project`]'s statement, one row at most. Its text has two
/// shapes (by id, by name), each built once per backend: a lookup is on
/// every request naming a stack, and building it through the query
/// builder cost as much as stepping it.
pub(super) fn find_in_project_statement(
    backend: sea_orm::DatabaseBackend,
    project_id: &str,
    key: StackKey<'_>,
) -> sea_orm::Statement {
    use std::sync::OnceLock;
    static TEXTS: [[OnceLock<String>; 2]; 2] = [
        [OnceLock::new(), OnceLock::new()],
        [OnceLock::new(), OnceLock::new()],
    ];
    let postgres = backend == sea_orm::DatabaseBackend::Postgres;
    let by_id = matches!(key, StackKey::Id(_));
    let text = TEXTS[usize::from(postgres)][usize::from(by_id)].get_or_init(|| {
        let shape = match key {
            StackKey::Id(_) => StackKey::Id(Uuid::nil()),
            StackKey::Name(_) => StackKey::Name(""),
        };
        sea_orm::QueryTrait::build(&find_in_project("", shape).limit(1), backend).sql
    });
    // In the order the builder binds them: the project, the id or the
    // name, the limit.
    let key_value = match key {
        StackKey::Id(id) => sea_orm::Value::from(id),
        StackKey::Name(name) => name.into(),
    };
    let values: Vec<sea_orm::Value> = vec![project_id.into(), key_value, 1_u64.into()];
    sea_orm::Statement::from_sql_and_values(backend, text.clone(), values)
}

/// The project's stack with this id (live or deleted) or this name (a
/// live one), as lookups read it ([`LIST_COLUMNS`]).
pub(super) fn find_in_project(
    project_id: &str,
    key: StackKey<'_>,
) -> sea_orm::Select<stacks::Entity> {
    let by = match key {
        StackKey::Id(id) => Condition::all().add(stacks::Column::Id.eq(id)),
        StackKey::Name(name) => Condition::all()
            .add(stacks::Column::Name.eq(name))
            .add(stacks::Column::DeletedAt.is_null()),
    };
    stacks::Entity::find()
        .filter(stacks::Column::ProjectId.eq(project_id))
        .filter(by)
        .select_only()
        .columns(LIST_COLUMNS)
}

/// [`find_in_project`]'s stack with its lease's generation, if the lease
/// is free at `now`, at [`FREE_LEASE_GENERATION_AT`].
pub(super) fn with_free_lease(
    project_id: &str,
    key: StackKey<'_>,
    now: DateTime<Utc>,
) -> sea_orm::Select<stacks::Entity> {
    use sea_orm::sea_query::QueryStatementBuilder;
    find_in_project(project_id, key)
        .expr(Expr::SubQuery(
            None,
            Box::new(free_generation_of_stack(now).into_sub_query_statement()),
        ))
        .limit(1)
}

/// The page of the project's stacks `query` asks for, newest first.
pub(super) async fn listed(
    connection: &impl ConnectionTrait,
    project_id: &str,
    query: &StackListQuery,
) -> Result<sea_orm::Select<stacks::Entity>> {
    let mut select = stacks::Entity::find()
        .filter(stacks::Column::ProjectId.eq(project_id))
        .filter(stacks::Column::DeletedAt.is_null());
    if !query.show_nested {
        select = select.filter(stacks::Column::ParentId.is_null());
    }
    if let Some(name) = &query.name {
        select = select.filter(stacks::Column::Name.eq(name.as_str()));
    }
    match query.locked {
        Some(true) => select = select.filter(stacks::Column::LockLevel.is_not_null()),
        Some(false) => select = select.filter(stacks::Column::LockLevel.is_null()),
        None => {}
    }
    if let Some(marker) = query.marker {
        let marker_row = stacks::Entity::find_by_id(marker)
            .filter(stacks::Column::ProjectId.eq(project_id))
            .one(connection)
            .await?
            .ok_or_else(|| Error::NotFound(format!("marker {marker} names no stack")))?;
        select = select.filter(
            Condition::any()
                .add(stacks::Column::CreatedAt.lt(marker_row.created_at))
                .add(
                    Condition::all()
                        .add(stacks::Column::CreatedAt.eq(marker_row.created_at))
                        .add(stacks::Column::Id.lt(marker_row.id)),
                ),
        );
    }
    // A list needs no templates: leave the large JSON columns unread.
    Ok(select
        .select_only()
        .columns(LIST_COLUMNS)
        .order_by_desc(stacks::Column::CreatedAt)
        .order_by_desc(stacks::Column::Id)
        .limit(u64::from(query.page_size())))
}

/// The stack with this id, live or deleted.
pub(super) fn by_id(stack_id: Uuid) -> sea_orm::Select<stacks::Entity> {
    stacks::Entity::find_by_id(stack_id)
        .select_only()
        .columns(LIST_COLUMNS)
}

/// Root stacks whose maintenance lock expired by `now`, soonest first.
pub(super) fn with_expired_locks(
    now: DateTime<Utc>,
    limit: u64,
) -> sea_orm::Select<stacks::Entity> {
    stacks::Entity::find()
        .filter(stacks::Column::LockExpiresAt.lte(now))
        .filter(stacks::Column::ParentId.is_null())
        .filter(stacks::Column::DeletedAt.is_null())
        .filter(stacks::Column::Action.eq(StackAction::Lock.as_str()))
        .filter(stacks::Column::Status.ne(ActionStatus::InProgress.as_str()))
        .order_by_asc(stacks::Column::LockExpiresAt)
        .limit(limit)
        .select_only()
        .columns(LIST_COLUMNS)
}

/// When the soonest maintenance lock of a root stack expires.
pub(super) async fn next_lock_expiry(
    connection: &impl ConnectionTrait,
) -> Result<Option<DateTime<Utc>>> {
    Ok(stacks::Entity::find()
        .filter(stacks::Column::LockExpiresAt.is_not_null())
        .filter(stacks::Column::ParentId.is_null())
        .filter(stacks::Column::DeletedAt.is_null())
        .filter(stacks::Column::Action.eq(StackAction::Lock.as_str()))
        .order_by_asc(stacks::Column::LockExpiresAt)
        .select_only()
        .column(stacks::Column::LockExpiresAt)
        .into_tuple::<Option<DateTime<Utc>>>()
        .one(connection)
        .await?
        .flatten())
}

/// The live stacks nested in `stack_id`, oldest first.
pub(super) fn children(stack_id: Uuid) -> sea_orm::Select<stacks::Entity> {
    stacks::Entity::find()
        .filter(stacks::Column::ParentId.eq(stack_id))
        .filter(stacks::Column::DeletedAt.is_null())
        .order_by_asc(stacks::Column::CreatedAt)
        .select_only()
        .columns(LIST_COLUMNS)
}

/// Up to `limit` stacks in progress, the longest unchanged first.
pub(super) fn in_progress(limit: u64) -> sea_orm::Select<stacks::Entity> {
    stacks::Entity::find()
        .filter(stacks::Column::Status.eq(ActionStatus::InProgress.as_str()))
        .select_only()
        .columns(LIST_COLUMNS)
        .order_by_asc(stacks::Column::UpdatedAt)
        .limit(limit)
}

/// Where `column` lies in a row read with [`LIST_COLUMNS`]: found by its
/// name in the list that also builds the statements, at compile time
/// (every call is in a `const` block), so a reordered list moves each read
/// with it and a column left out of it fails the build. A row is still
/// read by index: the derived reader looked each of the 24 columns up by
/// name in every row, which was most of a list's cost.
const fn listed_at(column: stacks::Column) -> usize {
    let mut index = 0;
    while index < LIST_COLUMNS.len() {
        if LIST_COLUMNS[index] as usize == column as usize {
            return index;
        }
        index += 1;
    }
    panic!("the column is not among LIST_COLUMNS")
}

/// Where [`with_free_lease`]'s statement puts the free lease's generation:
/// after the stack's columns.
pub(super) const FREE_LEASE_GENERATION_AT: usize = LIST_COLUMNS.len();

/// A stack as lookups and lists read it ([`LIST_COLUMNS`]), each column
/// by its name (see [`listed_at`]). The action and status, parsed into
/// enums, are read where their text lies, not copied first.
pub(super) fn stack_from_columns(
    row: &Columns<'_>,
) -> std::result::Result<Stack, sea_orm::TryGetError> {
    use stacks::Column;
    let id: Uuid = row.get(const { listed_at(Column::Id) })?;
    let corrupt = |what: &str| {
        sea_orm::TryGetError::DbErr(DbErr::Type(format!("{id}: stored {what} is invalid")))
    };
    let tags: Value = row.get(const { listed_at(Column::Tags) })?;
    let tags = tags
        .as_array()
        .and_then(|tags| {
            tags.iter()
                .map(|tag| tag.as_str().map(str::to_owned))
                .collect::<Option<Vec<_>>>()
        })
        .ok_or_else(|| corrupt("stack tags"))?;
    let lock_level = match row.get::<Option<String>>(const { listed_at(Column::LockLevel) })? {
        Some(level) => Some(LockLevel::parse(&level).ok_or_else(|| corrupt("lock level"))?),
        None => None,
    };
    let locked_by_user: Option<String> = row.get(const { listed_at(Column::LockedByUser) })?;
    let locked_by_admin: Option<bool> = row.get(const { listed_at(Column::LockedByAdmin) })?;
    let locked_at: Option<DateTime<Utc>> = row.get(const { listed_at(Column::LockedAt) })?;
    let lock_reason: Option<String> = row.get(const { listed_at(Column::LockReason) })?;
    let lock_expires_at: Option<DateTime<Utc>> =
        row.get(const { listed_at(Column::LockExpiresAt) })?;
    Ok(Stack {
        id,
        name: row.get(const { listed_at(Column::Name) })?,
        project_id: row.get(const { listed_at(Column::ProjectId) })?,
        user_id: row.get(const { listed_at(Column::UserId) })?,
        parent_id: row.get(const { listed_at(Column::ParentId) })?,
        action: row
            .with_text(const { listed_at(Column::Action) }, StackAction::parse)?
            .ok_or_else(|| corrupt("stack action"))?,
        status: row
            .with_text(const { listed_at(Column::Status) }, ActionStatus::parse)?
            .ok_or_else(|| corrupt("stack status"))?,
        status_reason: row.get(const { listed_at(Column::StatusReason) })?,
        description: row.get(const { listed_at(Column::Description) })?,
        tags,
        timeout_mins: row
            .get::<Option<i32>>(const { listed_at(Column::TimeoutMins) })?
            .and_then(|minutes| u32::try_from(minutes).ok()),
        disable_rollback: row.get(const { listed_at(Column::DisableRollback) })?,
        created_at: row.get(const { listed_at(Column::CreatedAt) })?,
        updated_at: row.get(const { listed_at(Column::UpdatedAt) })?,
        nested_depth: u32::try_from(row.get::<i32>(const { listed_at(Column::NestedDepth) })?)
            .unwrap_or(0),
        parent_resource: row.get(const { listed_at(Column::ParentResource) })?,
        deleted_at: row.get(const { listed_at(Column::DeletedAt) })?,
        definition_version: row.get(const { listed_at(Column::DefinitionVersion) })?,
        maintenance_lock: match (lock_level, locked_by_user, locked_at) {
            (Some(level), Some(locked_by_user), Some(locked_at)) => Some(MaintenanceLock {
                level,
                locked_by_user,
                locked_by_admin: locked_by_admin.unwrap_or(false),
                locked_at,
                reason: lock_reason,
                expires_at: lock_expires_at,
            }),
            _ => None,
        },
    })
}

/// A stack's definition and its version.
pub(super) async fn load_versioned_definition(
    connection: &impl ConnectionTrait,
    stack_id: Uuid,
) -> Result<(StackDefinition, i64)> {
    let (template, environment, files, parameters, version): (Value, Value, Value, Value, i64) =
        stacks::Entity::find_by_id(stack_id)
            .select_only()
            .columns([
                stacks::Column::Template,
                stacks::Column::Environment,
                stacks::Column::Files,
                stacks::Column::Parameters,
                stacks::Column::DefinitionVersion,
            ])
            .into_tuple()
            .one(connection)
            .await?
            .ok_or_else(|| Error::NotFound(format!("stack {stack_id} not found")))?;
    let definition = definition_from_columns(stack_id, template, environment, files, parameters)?;
    Ok((definition, version))
}

/// The definition a running update of `stack_id` moves away from.
pub(super) async fn load_update_origin(
    connection: &impl ConnectionTrait,
    stack_id: Uuid,
) -> Result<Option<StackDefinition>> {
    stack_update_origins::Entity::find_by_id(stack_id)
        .one(connection)
        .await?
        .map(|row| {
            definition_from_columns(
                stack_id,
                row.template,
                row.environment,
                row.files,
                row.parameters,
            )
        })
        .transpose()
}

/// A stored definition from its columns.
pub(super) fn definition_from_columns(
    stack_id: Uuid,
    template: Value,
    environment: Value,
    files: Value,
    parameters: Value,
) -> Result<StackDefinition> {
    let files: BTreeMap<String, String> = serde_json::from_value(files).map_err(|error| {
        Error::Database(format!(
            "stack {stack_id}: stored files are invalid: {error}"
        ))
    })?;
    let Value::Object(parameters) = parameters else {
        return Err(Error::Database(format!(
            "stack {stack_id}: stored parameters are invalid"
        )));
    };
    Ok(StackDefinition {
        template,
        environment,
        files,
        parameters,
    })
}

#[cfg(test)]
mod tests {
    use sea_orm::{DatabaseBackend, QuerySelect, QueryTrait};

    use super::{StackKey, find_in_project, find_in_project_statement};

    #[test]
    fn a_lookups_statement_is_the_one_the_query_builder_makes() {
        for backend in [DatabaseBackend::Sqlite, DatabaseBackend::Postgres] {
            for name_or_id in ["web", "3f0b5bb2-8c4e-4a5e-9d0e-7f1e2a9c6b10", "Web Tier"] {
                for key in StackKey::tried_for(name_or_id) {
                    // Twice: the second from the text written the first time.
                    for _ in 0..2 {
                        assert_eq!(
                            find_in_project_statement(backend, "project-a", key),
                            find_in_project("project-a", key).limit(1).build(backend),
                            "{backend:?} {key:?}"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn a_uuid_is_looked_up_as_an_id_first_then_as_a_name() {
        let id = "3f0b5bb2-8c4e-4a5e-9d0e-7f1e2a9c6b10";
        let keys: Vec<String> = StackKey::tried_for(id)
            .map(|key| format!("{key:?}"))
            .collect();
        assert_eq!(keys, [format!("Id({id})"), format!("Name({id:?})")]);
        let keys: Vec<String> = StackKey::tried_for("web")
            .map(|key| format!("{key:?}"))
            .collect();
        assert_eq!(keys, ["Name(\"web\")"]);
    }
}
