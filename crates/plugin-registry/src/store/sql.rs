//! [`PluginStore`] on sea-orm: one implementation for SQLite and PostgreSQL.

use async_trait::async_trait;
use sea_orm::{ActiveValue::Set, DatabaseConnection, EntityTrait, QueryOrder, SqlErr};

use super::PluginStore;
use super::entity::{self, Entity as Plugins};
use crate::domain::{FailureMode, Operation, Plugin};
use crate::error::{Error, Result};

pub struct SqlPluginStore {
    connection: DatabaseConnection,
}

impl SqlPluginStore {
    pub fn new(connection: DatabaseConnection) -> Self {
        SqlPluginStore { connection }
    }
}

#[async_trait]
impl PluginStore for SqlPluginStore {
    async fn register_plugin(&self, plugin: &Plugin) -> Result<()> {
        let row = entity::ActiveModel {
            name: Set(plugin.name.clone()),
            endpoint: Set(plugin.endpoint.clone()),
            ordinal: Set(plugin.ordinal),
            operations: Set(serde_json::json!(
                plugin
                    .operations
                    .iter()
                    .map(|op| op.as_str())
                    .collect::<Vec<_>>()
            )),
            project_ids: Set(serde_json::json!(plugin.project_ids)),
            failure_mode: Set(plugin.failure_mode.as_str().to_owned()),
            timeout_ms: Set(i64::from(plugin.timeout_ms)),
            enabled: Set(plugin.enabled),
            created_at: Set(plugin.created_at),
            updated_at: Set(plugin.updated_at),
        };
        match Plugins::insert(row).exec(&self.connection).await {
            Ok(_) => Ok(()),
            Err(error) => match error.sql_err() {
                Some(SqlErr::UniqueConstraintViolation(_)) => Err(Error::Conflict(format!(
                    "a plugin named {:?} is already registered",
                    plugin.name
                ))),
                _ => Err(error.into()),
            },
        }
    }

    async fn get_plugin(&self, name: &str) -> Result<Option<Plugin>> {
        Plugins::find_by_id(name.to_owned())
            .one(&self.connection)
            .await?
            .map(plugin_from_row)
            .transpose()
    }

    async fn list_plugins(&self) -> Result<Vec<Plugin>> {
        Plugins::find()
            .order_by_asc(entity::Column::Ordinal)
            .order_by_asc(entity::Column::Name)
            .all(&self.connection)
            .await?
            .into_iter()
            .map(plugin_from_row)
            .collect()
    }
}

fn plugin_from_row(row: entity::Model) -> Result<Plugin> {
    let corrupt =
        |what: &str| Error::Database(format!("plugin {:?}: stored {what} is invalid", row.name));
    let operations = string_list(&row.operations)
        .ok_or_else(|| corrupt("operations"))?
        .iter()
        .map(|text| Operation::parse(text).ok_or_else(|| corrupt("operations")))
        .collect::<Result<Vec<_>>>()?;
    let project_ids = string_list(&row.project_ids).ok_or_else(|| corrupt("project_ids"))?;
    let failure_mode =
        FailureMode::parse(&row.failure_mode).ok_or_else(|| corrupt("failure_mode"))?;
    let timeout_ms = u32::try_from(row.timeout_ms).map_err(|_| corrupt("timeout_ms"))?;
    Ok(Plugin {
        name: row.name,
        endpoint: row.endpoint,
        ordinal: row.ordinal,
        operations,
        project_ids,
        failure_mode,
        timeout_ms,
        enabled: row.enabled,
        created_at: row.created_at,
        updated_at: row.updated_at,
    })
}

fn string_list(value: &serde_json::Value) -> Option<Vec<String>> {
    value
        .as_array()?
        .iter()
        .map(|item| item.as_str().map(str::to_owned))
        .collect()
}
