//! The engine's stores on sea-orm: one implementation for SQLite and
//! PostgreSQL.

use async_trait::async_trait;
use sea_orm::{
    ActiveValue::Set, ColumnTrait, Condition, DatabaseConnection, EntityTrait, QueryFilter,
    QueryOrder, QuerySelect, SqlErr,
};
use uuid::Uuid;

use super::entity::stacks;
use super::{StackListQuery, StackStore};
use crate::domain::{ActionStatus, Stack, StackAction};
use crate::error::{Error, Result};

pub struct SqlStackStore {
    connection: DatabaseConnection,
}

impl SqlStackStore {
    pub fn new(connection: DatabaseConnection) -> Self {
        SqlStackStore { connection }
    }
}

#[async_trait]
impl StackStore for SqlStackStore {
    async fn insert_stack(&self, stack: &Stack) -> Result<()> {
        let row = stacks::ActiveModel {
            id: Set(stack.id),
            name: Set(stack.name.clone()),
            project_id: Set(stack.project_id.clone()),
            user_id: Set(stack.user_id.clone()),
            parent_id: Set(stack.parent_id),
            action: Set(stack.action.as_str().to_owned()),
            status: Set(stack.status.as_str().to_owned()),
            status_reason: Set(stack.status_reason.clone()),
            description: Set(stack.description.clone()),
            tags: Set(serde_json::json!(stack.tags)),
            timeout_mins: Set(stack
                .timeout_mins
                .and_then(|minutes| i32::try_from(minutes).ok())),
            disable_rollback: Set(stack.disable_rollback),
            created_at: Set(stack.created_at),
            updated_at: Set(stack.updated_at),
        };
        match stacks::Entity::insert(row).exec(&self.connection).await {
            Ok(_) => Ok(()),
            Err(error) => match error.sql_err() {
                Some(SqlErr::UniqueConstraintViolation(_)) => Err(Error::Conflict(format!(
                    "a stack named {:?} already exists in this project",
                    stack.name
                ))),
                _ => Err(error.into()),
            },
        }
    }

    async fn find_stack(&self, project_id: &str, name_or_id: &str) -> Result<Option<Stack>> {
        let by = match Uuid::parse_str(name_or_id) {
            Ok(id) => Condition::any()
                .add(stacks::Column::Id.eq(id))
                .add(stacks::Column::Name.eq(name_or_id)),
            Err(_) => Condition::all().add(stacks::Column::Name.eq(name_or_id)),
        };
        stacks::Entity::find()
            .filter(stacks::Column::ProjectId.eq(project_id))
            .filter(by)
            .one(&self.connection)
            .await?
            .map(stack_from_row)
            .transpose()
    }

    async fn list_stacks(&self, project_id: &str, query: &StackListQuery) -> Result<Vec<Stack>> {
        let mut select = stacks::Entity::find().filter(stacks::Column::ProjectId.eq(project_id));
        if !query.show_nested {
            select = select.filter(stacks::Column::ParentId.is_null());
        }
        if let Some(name) = &query.name {
            select = select.filter(stacks::Column::Name.eq(name.as_str()));
        }
        if let Some(marker) = query.marker {
            let marker_row = stacks::Entity::find_by_id(marker)
                .filter(stacks::Column::ProjectId.eq(project_id))
                .one(&self.connection)
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
        select
            .order_by_desc(stacks::Column::CreatedAt)
            .order_by_desc(stacks::Column::Id)
            .limit(u64::from(query.page_size()))
            .all(&self.connection)
            .await?
            .into_iter()
            .map(stack_from_row)
            .collect()
    }
}

fn stack_from_row(row: stacks::Model) -> Result<Stack> {
    let corrupt =
        |what: &str| Error::Database(format!("stack {}: stored {what} is invalid", row.id));
    let action = StackAction::parse(&row.action).ok_or_else(|| corrupt("action"))?;
    let status = ActionStatus::parse(&row.status).ok_or_else(|| corrupt("status"))?;
    let tags = row
        .tags
        .as_array()
        .and_then(|tags| {
            tags.iter()
                .map(|tag| tag.as_str().map(str::to_owned))
                .collect::<Option<Vec<_>>>()
        })
        .ok_or_else(|| corrupt("tags"))?;
    Ok(Stack {
        id: row.id,
        name: row.name,
        project_id: row.project_id,
        user_id: row.user_id,
        parent_id: row.parent_id,
        action,
        status,
        status_reason: row.status_reason,
        description: row.description,
        tags,
        timeout_mins: row
            .timeout_mins
            .and_then(|minutes| u32::try_from(minutes).ok()),
        disable_rollback: row.disable_rollback,
        created_at: row.created_at,
        updated_at: row.updated_at,
    })
}
