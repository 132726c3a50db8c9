//! [`PluginStore`] on sea-orm: one implementation for SQLite and PostgreSQL.
//! Every write opens with the generation bump, so on PostgreSQL the row lock
//! on `registry_generation` serialises registry writers, and on SQLite the
//! transaction takes the write lock before it reads.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use sea_orm::sea_query::{Expr, ExprTrait};
use sea_orm::{
    ActiveValue::Set, ColumnTrait, ConnectionTrait, DatabaseConnection, EntityTrait, QueryFilter,
    QueryOrder, SqlErr, TransactionTrait,
};

use super::PluginStore;
use super::circuit_entity::{self, Entity as PluginCircuits};
use super::entity::{self, Entity as Plugins};
use super::generation_entity::{self, Entity as RegistryGeneration};
use crate::domain::{BreakerSettings, CircuitRecord, FailureMode, Operation, Plugin, PluginUpdate};
use crate::error::{Error, Result};

pub struct SqlPluginStore {
    connection: DatabaseConnection,
    /// Reads outside transactions (see `ember_runtime::database::connect_reader`):
    /// every stack operation reads the registry's generation.
    reader: ember_runtime::database::Reader,
}

impl SqlPluginStore {
    pub fn new(connection: DatabaseConnection) -> Self {
        SqlPluginStore {
            reader: ember_runtime::database::Reader::shared(connection.clone()),
            connection,
        }
    }

    pub fn with_reader(
        connection: DatabaseConnection,
        reader: impl Into<ember_runtime::database::Reader>,
    ) -> Self {
        SqlPluginStore {
            connection,
            reader: reader.into(),
        }
    }
}

fn not_found(name: &str) -> Error {
    Error::NotFound(format!("no plugin named {name:?}"))
}

/// Advances the registry generation inside the caller's transaction.
async fn advance_generation(connection: &impl ConnectionTrait) -> Result<()> {
    let result = RegistryGeneration::update_many()
        .col_expr(
            generation_entity::Column::Generation,
            Expr::col(generation_entity::Column::Generation).add(1),
        )
        .filter(generation_entity::Column::Id.eq(generation_entity::ROW_ID))
        .exec(connection)
        .await?;
    if result.rows_affected == 1 {
        Ok(())
    } else {
        Err(Error::Database(
            "the registry_generation row is missing: the migrations did not run".to_owned(),
        ))
    }
}

fn row_from_plugin(plugin: &Plugin) -> entity::ActiveModel {
    entity::ActiveModel {
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
        enforce: Set(plugin.enforce),
        breaker_failures: Set(i32::try_from(plugin.breaker.failures).unwrap_or(i32::MAX)),
        breaker_cooldown_ms: Set(i64::from(plugin.breaker.cooldown_ms)),
        created_at: Set(plugin.created_at),
        updated_at: Set(plugin.updated_at),
    }
}

#[async_trait]
impl PluginStore for SqlPluginStore {
    async fn register_plugin(&self, plugin: &Plugin) -> Result<()> {
        let transaction = self.connection.begin().await?;
        advance_generation(&transaction).await?;
        match Plugins::insert(row_from_plugin(plugin))
            .exec(&transaction)
            .await
        {
            Ok(_) => {}
            Err(error) => {
                return match error.sql_err() {
                    Some(SqlErr::UniqueConstraintViolation(_)) => Err(Error::Conflict(format!(
                        "a plugin named {:?} is already registered",
                        plugin.name
                    ))),
                    _ => Err(error.into()),
                };
            }
        }
        transaction.commit().await?;
        Ok(())
    }

    async fn update_plugin(
        &self,
        name: &str,
        update: &PluginUpdate,
        now: DateTime<Utc>,
    ) -> Result<Plugin> {
        let transaction = self.connection.begin().await?;
        advance_generation(&transaction).await?;
        let current = Plugins::find_by_id(name.to_owned())
            .one(&transaction)
            .await?
            .map(plugin_from_row)
            .transpose()?
            .ok_or_else(|| not_found(name))?;
        let current = Plugin {
            circuit: circuit_of(&transaction, name).await?,
            ..current
        };
        let updated = current.with_update(update, now)?;
        Plugins::update(row_from_plugin(&updated))
            .exec(&transaction)
            .await?;
        if update.closes_circuit(&current) {
            PluginCircuits::delete_by_id(name.to_owned())
                .exec(&transaction)
                .await?;
        }
        transaction.commit().await?;
        Ok(updated)
    }

    async fn deregister_plugin(&self, name: &str) -> Result<Plugin> {
        let transaction = self.connection.begin().await?;
        advance_generation(&transaction).await?;
        let removed = Plugins::find_by_id(name.to_owned())
            .one(&transaction)
            .await?
            .map(plugin_from_row)
            .transpose()?
            .ok_or_else(|| not_found(name))?;
        let result = Plugins::delete_by_id(name.to_owned())
            .exec(&transaction)
            .await?;
        if result.rows_affected != 1 {
            return Err(not_found(name));
        }
        PluginCircuits::delete_by_id(name.to_owned())
            .exec(&transaction)
            .await?;
        transaction.commit().await?;
        Ok(removed)
    }

    async fn get_plugin(&self, name: &str) -> Result<Option<Plugin>> {
        let Some(plugin) = Plugins::find_by_id(name.to_owned())
            .one(&self.reader)
            .await?
            .map(plugin_from_row)
            .transpose()?
        else {
            return Ok(None);
        };
        Ok(Some(Plugin {
            circuit: circuit_of(&self.reader, name).await?,
            ..plugin
        }))
    }

    async fn list_plugins(&self) -> Result<Vec<Plugin>> {
        let mut circuits: std::collections::HashMap<String, CircuitRecord> = PluginCircuits::find()
            .all(&self.reader)
            .await?
            .into_iter()
            .map(|row| (row.name.clone(), circuit_from_row(row)))
            .collect();
        Plugins::find()
            .order_by_asc(entity::Column::Ordinal)
            .order_by_asc(entity::Column::Name)
            .all(&self.reader)
            .await?
            .into_iter()
            .map(|row| {
                let plugin = plugin_from_row(row)?;
                Ok(Plugin {
                    circuit: circuits.remove(&plugin.name).unwrap_or_default(),
                    ..plugin
                })
            })
            .collect()
    }

    async fn registry_generation(&self) -> Result<i64> {
        self.reader
            .rows(
                generation_statement(self.reader.get_database_backend()),
                |row| row.get(0),
            )
            .await?
            .pop()
            .ok_or_else(|| {
                Error::Database(
                    "the registry_generation row is missing: the migrations did not run".to_owned(),
                )
            })
    }

    async fn record_failure(
        &self,
        name: &str,
        settings: BreakerSettings,
        now: DateTime<Utc>,
        message: &str,
        probe: bool,
    ) -> Result<Option<CircuitRecord>> {
        let transaction = self.connection.begin().await?;
        // The bump first: it serialises this with every registry write.
        advance_generation(&transaction).await?;
        if Plugins::find_by_id(name.to_owned())
            .one(&transaction)
            .await?
            .is_none()
        {
            return Ok(None);
        }
        let row = PluginCircuits::find_by_id(name.to_owned())
            .one(&transaction)
            .await?;
        let exists = row.is_some();
        let current = row.map(circuit_from_row).unwrap_or_default();
        let next = current.after_failure(settings, now, message, probe);
        let active = circuit_entity::ActiveModel {
            name: Set(name.to_owned()),
            consecutive_failures: Set(i64::from(next.consecutive_failures)),
            opened_at: Set(next.opened_at),
            open_until: Set(next.open_until),
            probe_until: Set(None),
            last_failure: Set(next.last_failure.clone()),
        };
        if exists {
            PluginCircuits::update(active).exec(&transaction).await?;
        } else {
            PluginCircuits::insert(active).exec(&transaction).await?;
        }
        transaction.commit().await?;
        Ok(Some(next))
    }

    async fn record_success(&self, name: &str) -> Result<()> {
        let transaction = self.connection.begin().await?;
        advance_generation(&transaction).await?;
        PluginCircuits::delete_by_id(name.to_owned())
            .exec(&transaction)
            .await?;
        transaction.commit().await?;
        Ok(())
    }

    async fn claim_probe(
        &self,
        name: &str,
        now: DateTime<Utc>,
        until: DateTime<Utc>,
    ) -> Result<bool> {
        let claimed = PluginCircuits::update_many()
            .col_expr(circuit_entity::Column::ProbeUntil, Expr::value(until))
            .filter(circuit_entity::Column::Name.eq(name))
            .filter(circuit_entity::Column::OpenUntil.lte(now))
            .filter(
                sea_orm::Condition::any()
                    .add(circuit_entity::Column::ProbeUntil.is_null())
                    .add(circuit_entity::Column::ProbeUntil.lt(now)),
            )
            .exec(&self.connection)
            .await?;
        Ok(claimed.rows_affected == 1)
    }
}

/// `name`'s circuit as stored (no row: closed).
async fn circuit_of(connection: &impl ConnectionTrait, name: &str) -> Result<CircuitRecord> {
    Ok(PluginCircuits::find_by_id(name.to_owned())
        .one(connection)
        .await?
        .map(circuit_from_row)
        .unwrap_or_default())
}

fn circuit_from_row(row: circuit_entity::Model) -> CircuitRecord {
    CircuitRecord {
        consecutive_failures: u32::try_from(row.consecutive_failures).unwrap_or(u32::MAX),
        opened_at: row.opened_at,
        open_until: row.open_until,
        last_failure: row.last_failure,
    }
}

/// The generation's read: every stack operation makes it, so its text is
/// built once per backend and its row read in place (`Reader::rows`).
fn generation_statement(backend: sea_orm::DatabaseBackend) -> sea_orm::Statement {
    use sea_orm::{QuerySelect, QueryTrait};
    use std::sync::OnceLock;
    static TEXTS: [OnceLock<String>; 2] = [OnceLock::new(), OnceLock::new()];
    let text =
        TEXTS[usize::from(backend == sea_orm::DatabaseBackend::Postgres)].get_or_init(|| {
            RegistryGeneration::find_by_id(generation_entity::ROW_ID)
                .select_only()
                .column(generation_entity::Column::Generation)
                .build(backend)
                .sql
        });
    sea_orm::Statement::from_sql_and_values(
        backend,
        text.clone(),
        [generation_entity::ROW_ID.into()],
    )
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
    let breaker = BreakerSettings {
        failures: u32::try_from(row.breaker_failures).map_err(|_| corrupt("breaker_failures"))?,
        cooldown_ms: u32::try_from(row.breaker_cooldown_ms)
            .map_err(|_| corrupt("breaker_cooldown_ms"))?,
    };
    Ok(Plugin {
        name: row.name,
        endpoint: row.endpoint,
        ordinal: row.ordinal,
        operations,
        project_ids,
        failure_mode,
        timeout_ms,
        enabled: row.enabled,
        enforce: row.enforce,
        breaker,
        circuit: CircuitRecord::default(),
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

#[cfg(test)]
mod tests {
    use sea_orm::{DatabaseBackend, EntityTrait, QueryTrait};

    use super::{RegistryGeneration, generation_entity, generation_statement};

    #[test]
    fn the_generations_statement_is_the_one_the_query_builder_makes() {
        for backend in [DatabaseBackend::Sqlite, DatabaseBackend::Postgres] {
            let built = RegistryGeneration::find_by_id(generation_entity::ROW_ID).build(backend);
            let statement = generation_statement(backend);
            assert_eq!(statement.values, built.values, "{backend:?}");
            assert!(
                statement
                    .sql
                    .ends_with(built.sql.split_once(" FROM ").expect("a FROM").1),
                "{backend:?}: {} vs {}",
                statement.sql,
                built.sql
            );
            assert!(
                statement.sql.contains("\"generation\""),
                "{}",
                statement.sql
            );
        }
    }
}
