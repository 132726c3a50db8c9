//! Persistence of software configs and deployments. Every read is scoped
//! to a project (`None` only for the engine's own lookups, e.g. a signal
//! that proved itself with a secret); a config still used by a deployment
//! cannot be deleted; a deployment's update can be made conditional on its
//! status, so two signals racing on one deployment apply once.

use async_trait::async_trait;
use sea_orm::{ConnectionTrait, DatabaseConnection, QueryResult};
use serde_json::{Map, Value};
use uuid::Uuid;

use crate::domain::software::{DeploymentStatus, SoftwareConfig, SoftwareDeployment};
use crate::error::{Error, Result};
use ember_runtime::database::statement;

/// The columns of a deployment an update sets (`None` = unchanged).
#[derive(Debug, Clone, Default)]
pub struct DeploymentChange {
    pub config_id: Option<Uuid>,
    pub input_values: Option<Map<String, Value>>,
    pub output_values: Option<Map<String, Value>>,
    pub action: Option<String>,
    pub status: Option<DeploymentStatus>,
    pub status_reason: Option<String>,
    /// Apply only while the deployment has this status.
    pub only_if_status: Option<DeploymentStatus>,
}

#[async_trait]
pub trait SoftwareStore: Send + Sync + 'static {
    async fn create_config(&self, config: &SoftwareConfig) -> Result<()>;
    async fn get_config(
        &self,
        project_id: Option<&str>,
        id: Uuid,
    ) -> Result<Option<SoftwareConfig>>;
    /// A page of configs, newest last, after `marker`.
    async fn list_configs(
        &self,
        project_id: Option<&str>,
        limit: u64,
        marker: Option<Uuid>,
    ) -> Result<Vec<SoftwareConfig>>;
    /// Deletes a config no deployment uses; false when there was none.
    async fn delete_config(&self, project_id: Option<&str>, id: Uuid) -> Result<bool>;
    async fn create_deployment(&self, deployment: &SoftwareDeployment) -> Result<()>;
    async fn get_deployment(
        &self,
        project_id: Option<&str>,
        id: Uuid,
    ) -> Result<Option<SoftwareDeployment>>;
    /// The configs of a server's deployments (one per deployment), in one
    /// query: what its agent polls.
    async fn server_configs(
        &self,
        project_id: Option<&str>,
        server_id: &str,
    ) -> Result<Vec<SoftwareConfig>>;
    /// The project's deployments, of one server when given.
    async fn list_deployments(
        &self,
        project_id: Option<&str>,
        server_id: Option<&str>,
    ) -> Result<Vec<SoftwareDeployment>>;
    /// Applies `change`; `None` when the deployment is gone or (with
    /// `only_if_status`) no longer in that status.
    async fn update_deployment(
        &self,
        project_id: Option<&str>,
        id: Uuid,
        change: &DeploymentChange,
    ) -> Result<Option<SoftwareDeployment>>;
    async fn delete_deployment(&self, project_id: Option<&str>, id: Uuid) -> Result<bool>;
}

pub struct SqlSoftwareStore {
    connection: DatabaseConnection,
    reader: ember_runtime::database::Reader,
}

impl SqlSoftwareStore {
    pub fn new(
        connection: DatabaseConnection,
        reader: impl Into<ember_runtime::database::Reader>,
    ) -> Self {
        SqlSoftwareStore {
            connection,
            reader: reader.into(),
        }
    }
}

fn json_text(value: &Value) -> String {
    value.to_string()
}

fn parse_json(text: &str, what: &str) -> Result<Value> {
    serde_json::from_str(text).map_err(|error| Error::Database(format!("stored {what}: {error}")))
}

fn parse_object(text: &str, what: &str) -> Result<Map<String, Value>> {
    match parse_json(text, what)? {
        Value::Object(map) => Ok(map),
        Value::Null => Ok(Map::new()),
        other => Err(Error::Database(format!(
            "stored {what} is not a map: {other}"
        ))),
    }
}

fn parse_list(text: &str, what: &str) -> Result<Vec<Value>> {
    match parse_json(text, what)? {
        Value::Array(items) => Ok(items),
        Value::Null => Ok(Vec::new()),
        other => Err(Error::Database(format!(
            "stored {what} is not a list: {other}"
        ))),
    }
}

const CONFIG_COLUMNS: &str =
    "id, project_id, name, group_name, config, inputs, outputs, options, created_at";
const DEPLOYMENT_COLUMNS: &str = "id, project_id, server_id, config_id, input_values, output_values, action, status, status_reason, created_at, updated_at";

fn config_from_row(row: &QueryResult) -> Result<SoftwareConfig> {
    let config: String = row.try_get("", "config")?;
    let inputs: String = row.try_get("", "inputs")?;
    let outputs: String = row.try_get("", "outputs")?;
    let options: String = row.try_get("", "options")?;
    Ok(SoftwareConfig {
        id: row.try_get("", "id")?,
        project_id: row.try_get("", "project_id")?,
        name: row.try_get("", "name")?,
        group: row.try_get("", "group_name")?,
        config: parse_json(&config, "config")?,
        inputs: parse_list(&inputs, "inputs")?,
        outputs: parse_list(&outputs, "outputs")?,
        options: parse_object(&options, "options")?,
        created_at: row.try_get("", "created_at")?,
    })
}

fn deployment_from_row(row: &QueryResult) -> Result<SoftwareDeployment> {
    let status: String = row.try_get("", "status")?;
    let inputs: String = row.try_get("", "input_values")?;
    let outputs: String = row.try_get("", "output_values")?;
    Ok(SoftwareDeployment {
        id: row.try_get("", "id")?,
        project_id: row.try_get("", "project_id")?,
        server_id: row.try_get("", "server_id")?,
        config_id: row.try_get("", "config_id")?,
        input_values: parse_object(&inputs, "input values")?,
        output_values: parse_object(&outputs, "output values")?,
        action: row.try_get("", "action")?,
        status: DeploymentStatus::parse(&status).ok_or_else(|| {
            Error::Database(format!("stored deployment status {status:?} is unknown"))
        })?,
        status_reason: row.try_get("", "status_reason")?,
        created_at: row.try_get("", "created_at")?,
        updated_at: row.try_get("", "updated_at")?,
    })
}

/// Adds `value` to a statement's bound values; its placeholder (`$n`).
fn bind(values: &mut Vec<sea_orm::Value>, value: impl Into<sea_orm::Value>) -> String {
    values.push(value.into());
    format!("${}", values.len())
}

/// `AND project_id = $n` when scoped, with its value.
fn project_filter(project_id: Option<&str>, values: &mut Vec<sea_orm::Value>) -> String {
    match project_id {
        Some(project_id) => format!(" AND project_id = {}", bind(values, project_id)),
        None => String::new(),
    }
}

/// ` WHERE` and the conditions joined by `AND`; nothing without any.
fn where_all(conditions: &[String]) -> String {
    if conditions.is_empty() {
        String::new()
    } else {
        format!(" WHERE {}", conditions.join(" AND "))
    }
}

/// `id = $1`, within the project when scoped: the condition naming one
/// row, with its values.
fn one_row(project_id: Option<&str>, id: Uuid) -> (String, Vec<sea_orm::Value>) {
    let mut values = vec![id.into()];
    let scope = project_filter(project_id, &mut values);
    (format!("id = $1{scope}"), values)
}

/// A list's first condition: the project's rows, when scoped.
fn project_conditions(project_id: Option<&str>, values: &mut Vec<sea_orm::Value>) -> Vec<String> {
    project_id
        .map(|project_id| format!("project_id = {}", bind(values, project_id)))
        .into_iter()
        .collect()
}

/// Runs `sql` on `connection`: how many rows it wrote.
async fn execute(
    connection: &impl ConnectionTrait,
    sql: &str,
    values: Vec<sea_orm::Value>,
) -> Result<u64> {
    let backend = connection.get_database_backend();
    let done = connection
        .execute_raw(statement(backend, sql, values))
        .await?;
    Ok(done.rows_affected())
}

/// The rows `sql` reads on `connection`, each decoded by `decode`.
async fn read_rows<T>(
    connection: &impl ConnectionTrait,
    sql: &str,
    values: Vec<sea_orm::Value>,
    decode: fn(&QueryResult) -> Result<T>,
) -> Result<Vec<T>> {
    let backend = connection.get_database_backend();
    let rows = connection
        .query_all_raw(statement(backend, sql, values))
        .await?;
    rows.iter().map(decode).collect()
}

/// The row `sql` reads (or returns) on `connection`, decoded by `decode`;
/// `None` when there is none.
async fn read_row<T>(
    connection: &impl ConnectionTrait,
    sql: &str,
    values: Vec<sea_orm::Value>,
    decode: fn(&QueryResult) -> Result<T>,
) -> Result<Option<T>> {
    let backend = connection.get_database_backend();
    let row = connection
        .query_one_raw(statement(backend, sql, values))
        .await?;
    row.as_ref().map(decode).transpose()
}

/// Inserts one row: `INSERT INTO table (columns) VALUES ($1, …, $n)`, the
/// values in the columns' order.
async fn insert_row(
    connection: &impl ConnectionTrait,
    table: &str,
    columns: &str,
    values: Vec<sea_orm::Value>,
) -> Result<()> {
    let placeholders = (1..=values.len())
        .map(|position| format!("${position}"))
        .collect::<Vec<_>>()
        .join(", ");
    let sql = format!("INSERT INTO {table} ({columns}) VALUES ({placeholders})");
    execute(connection, &sql, values).await?;
    Ok(())
}

#[async_trait]
impl SoftwareStore for SqlSoftwareStore {
    async fn create_config(&self, config: &SoftwareConfig) -> Result<()> {
        let values = vec![
            config.id.into(),
            config.project_id.clone().into(),
            config.name.clone().into(),
            config.group.clone().into(),
            json_text(&config.config).into(),
            json_text(&Value::Array(config.inputs.clone())).into(),
            json_text(&Value::Array(config.outputs.clone())).into(),
            json_text(&Value::Object(config.options.clone())).into(),
            config.created_at.into(),
        ];
        insert_row(&self.connection, "software_configs", CONFIG_COLUMNS, values).await
    }

    async fn get_config(
        &self,
        project_id: Option<&str>,
        id: Uuid,
    ) -> Result<Option<SoftwareConfig>> {
        let (row, values) = one_row(project_id, id);
        let sql = format!("SELECT {CONFIG_COLUMNS} FROM software_configs WHERE {row}");
        read_row(&self.reader, &sql, values, config_from_row).await
    }

    async fn server_configs(
        &self,
        project_id: Option<&str>,
        server_id: &str,
    ) -> Result<Vec<SoftwareConfig>> {
        let columns = CONFIG_COLUMNS
            .split(", ")
            .map(|column| format!("c.{column}"))
            .collect::<Vec<_>>()
            .join(", ");
        let mut values = vec![server_id.into()];
        let scope = match project_id {
            Some(project_id) => format!(" AND d.project_id = {}", bind(&mut values, project_id)),
            None => String::new(),
        };
        let sql = format!(
            "SELECT {columns} FROM software_deployments d \
             JOIN software_configs c ON c.id = d.config_id \
             WHERE d.server_id = $1{scope} ORDER BY c.name, d.created_at, d.id"
        );
        read_rows(&self.reader, &sql, values, config_from_row).await
    }

    async fn list_configs(
        &self,
        project_id: Option<&str>,
        limit: u64,
        marker: Option<Uuid>,
    ) -> Result<Vec<SoftwareConfig>> {
        let mut values = Vec::new();
        let mut conditions = project_conditions(project_id, &mut values);
        if let Some(marker) = marker {
            conditions.push(format!(
                "(created_at, id) > (SELECT created_at, id FROM software_configs WHERE id = {})",
                bind(&mut values, marker)
            ));
        }
        let filter = where_all(&conditions);
        let limit = bind(&mut values, i64::try_from(limit).unwrap_or(i64::MAX));
        let sql = format!(
            "SELECT {CONFIG_COLUMNS} FROM software_configs{filter} ORDER BY created_at, id LIMIT {limit}"
        );
        read_rows(&self.reader, &sql, values, config_from_row).await
    }

    async fn delete_config(&self, project_id: Option<&str>, id: Uuid) -> Result<bool> {
        let (row, values) = one_row(project_id, id);
        // One statement: a deployment created meanwhile cannot be left
        // pointing at nothing.
        let sql = format!(
            "DELETE FROM software_configs WHERE {row} \
             AND NOT EXISTS (SELECT 1 FROM software_deployments WHERE config_id = $1)"
        );
        if execute(&self.connection, &sql, values).await? > 0 {
            return Ok(true);
        }
        if self.get_config(project_id, id).await?.is_some() {
            return Err(Error::InvalidInput(format!(
                "Software config with id {id} can not be deleted as it is referenced."
            )));
        }
        Ok(false)
    }

    async fn create_deployment(&self, deployment: &SoftwareDeployment) -> Result<()> {
        let values = vec![
            deployment.id.into(),
            deployment.project_id.clone().into(),
            deployment.server_id.clone().into(),
            deployment.config_id.into(),
            json_text(&Value::Object(deployment.input_values.clone())).into(),
            json_text(&Value::Object(deployment.output_values.clone())).into(),
            deployment.action.clone().into(),
            deployment.status.as_str().into(),
            deployment.status_reason.clone().into(),
            deployment.created_at.into(),
            deployment.updated_at.into(),
        ];
        insert_row(
            &self.connection,
            "software_deployments",
            DEPLOYMENT_COLUMNS,
            values,
        )
        .await
    }

    async fn get_deployment(
        &self,
        project_id: Option<&str>,
        id: Uuid,
    ) -> Result<Option<SoftwareDeployment>> {
        let (row, values) = one_row(project_id, id);
        let sql = format!("SELECT {DEPLOYMENT_COLUMNS} FROM software_deployments WHERE {row}");
        // On the writer: a deployment's status is what waiters poll, and a
        // signal committed a moment ago must be seen.
        read_row(&self.connection, &sql, values, deployment_from_row).await
    }

    async fn list_deployments(
        &self,
        project_id: Option<&str>,
        server_id: Option<&str>,
    ) -> Result<Vec<SoftwareDeployment>> {
        let mut values = Vec::new();
        let mut conditions = project_conditions(project_id, &mut values);
        if let Some(server_id) = server_id {
            conditions.push(format!("server_id = {}", bind(&mut values, server_id)));
        }
        let filter = where_all(&conditions);
        let sql = format!(
            "SELECT {DEPLOYMENT_COLUMNS} FROM software_deployments{filter} ORDER BY created_at, id"
        );
        read_rows(&self.reader, &sql, values, deployment_from_row).await
    }

    async fn update_deployment(
        &self,
        project_id: Option<&str>,
        id: Uuid,
        change: &DeploymentChange,
    ) -> Result<Option<SoftwareDeployment>> {
        let mut values: Vec<sea_orm::Value> = Vec::new();
        let mut sets = Vec::new();
        let mut set = |column: &str, value: sea_orm::Value, values: &mut Vec<sea_orm::Value>| {
            sets.push(format!("{column} = {}", bind(values, value)));
        };
        if let Some(config_id) = change.config_id {
            set("config_id", config_id.into(), &mut values);
        }
        if let Some(inputs) = &change.input_values {
            set(
                "input_values",
                json_text(&Value::Object(inputs.clone())).into(),
                &mut values,
            );
        }
        if let Some(outputs) = &change.output_values {
            set(
                "output_values",
                json_text(&Value::Object(outputs.clone())).into(),
                &mut values,
            );
        }
        if let Some(action) = &change.action {
            set("action", action.clone().into(), &mut values);
        }
        if let Some(status) = change.status {
            set("status", status.as_str().into(), &mut values);
        }
        if let Some(reason) = &change.status_reason {
            set("status_reason", reason.clone().into(), &mut values);
        }
        set("updated_at", chrono::Utc::now().into(), &mut values);
        let mut conditions = format!("id = {}", bind(&mut values, id));
        conditions.push_str(&project_filter(project_id, &mut values));
        if let Some(status) = change.only_if_status {
            conditions.push_str(&format!(
                " AND status = {}",
                bind(&mut values, status.as_str())
            ));
        }
        let sql = format!(
            "UPDATE software_deployments SET {} WHERE {conditions} RETURNING {DEPLOYMENT_COLUMNS}",
            sets.join(", ")
        );
        read_row(&self.connection, &sql, values, deployment_from_row).await
    }

    async fn delete_deployment(&self, project_id: Option<&str>, id: Uuid) -> Result<bool> {
        let (row, values) = one_row(project_id, id);
        let sql = format!("DELETE FROM software_deployments WHERE {row}");
        Ok(execute(&self.connection, &sql, values).await? > 0)
    }
}
