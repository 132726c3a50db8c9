//! Persistence of receivers: the [`ReceiverStore`] trait and its SQL
//! implementation, one row per receiver with its documents as JSON text,
//! and the queues of message receivers (see `messages`). Ids are stored
//! as text so that a short id (a prefix) is one `LIKE` on both SQLite and
//! PostgreSQL.

mod messages;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use sea_orm::{ConnectionTrait, DatabaseConnection, QueryResult, TransactionTrait};
use serde_json::{Map, Value};
use uuid::Uuid;

use crate::domain::receiver::{Receiver, ReceiverMessage, ReceiverType};
pub use crate::domain::receiver::{ReceiverQuery, ReceiverSortKey};
use crate::error::{Error, Result};
use ember_runtime::database::statement;

/// The column a sort key orders by.
fn column(key: ReceiverSortKey) -> &'static str {
    match key {
        ReceiverSortKey::Name => "name",
        ReceiverSortKey::Type => "type",
        ReceiverSortKey::Action => "action",
        ReceiverSortKey::ClusterId => "cluster_id",
        ReceiverSortKey::CreatedAt => "created_at",
        ReceiverSortKey::User => "user_id",
    }
}

impl ReceiverQuery {
    fn page_size(&self) -> usize {
        let limit = match self.limit {
            0 => super::DEFAULT_PAGE_SIZE,
            limit => limit.min(super::MAX_PAGE_SIZE),
        };
        usize::try_from(limit).unwrap_or(usize::MAX)
    }
}

#[async_trait]
pub trait ReceiverStore: Send + Sync + 'static {
    async fn insert_receiver(&self, receiver: &Receiver) -> Result<()>;
    /// Any project's receiver by its full id.
    async fn get_receiver(&self, id: Uuid) -> Result<Option<Receiver>>;
    /// The receivers `name_or_id` names within a project (any project when
    /// `project_id` is `None`), at most two: by id, else by exact name,
    /// else by short id (a prefix of the id). Two means it is ambiguous.
    async fn match_receivers(
        &self,
        project_id: Option<&str>,
        name_or_id: &str,
    ) -> Result<Vec<Receiver>>;
    /// A page of receivers; `Error::InvalidInput` when the marker is not
    /// among them.
    async fn list_receivers(&self, query: &ReceiverQuery) -> Result<Vec<Receiver>>;
    /// Writes the name, action, params and update time of `receiver`
    /// (only those columns); false when it is gone.
    async fn update_receiver(&self, receiver: &Receiver) -> Result<bool>;
    /// Deletes the receiver and its queue's messages, in one transaction;
    /// false when there was no such receiver.
    async fn delete_receiver(&self, id: Uuid) -> Result<bool>;

    /// Stores `messages` in the queue of message receiver `receiver_id`,
    /// all of them in one transaction, if the receiver still exists; false
    /// (nothing stored) when it does not.
    async fn post_messages(&self, receiver_id: Uuid, messages: &[ReceiverMessage]) -> Result<bool>;
    /// Claims, oldest first, up to `limit` messages (of `receiver_id`
    /// when given, else of every queue) that have not expired at `now` and
    /// that no claim holds (or whose claim's lease has passed): they are
    /// `claim_token`'s until `lease_until`.
    async fn claim_messages(
        &self,
        receiver_id: Option<Uuid>,
        claim_token: Uuid,
        now: DateTime<Utc>,
        lease_until: DateTime<Utc>,
        limit: u64,
    ) -> Result<Vec<ReceiverMessage>>;
    /// Deletes a message its claim ran (or dropped); false when `claim_token`
    /// no longer holds it (its receiver was deleted, or the lease passed
    /// and another claim took it).
    async fn delete_claimed_message(&self, id: Uuid, claim_token: Uuid) -> Result<bool>;
    /// Deletes the messages expired at `now` that no claim holds; returns
    /// them.
    async fn delete_expired_messages(&self, now: DateTime<Utc>) -> Result<Vec<ReceiverMessage>>;
    /// The messages waiting in a receiver's queue, oldest first.
    async fn list_messages(&self, receiver_id: Uuid) -> Result<Vec<ReceiverMessage>>;
}

pub struct SqlReceiverStore {
    connection: DatabaseConnection,
    reader: ember_runtime::database::Reader,
}

impl SqlReceiverStore {
    pub fn new(
        connection: DatabaseConnection,
        reader: impl Into<ember_runtime::database::Reader>,
    ) -> Self {
        SqlReceiverStore {
            connection,
            reader: reader.into(),
        }
    }

    async fn select(&self, filter: &str, values: Vec<sea_orm::Value>) -> Result<Vec<Receiver>> {
        let backend = self.reader.get_database_backend();
        let rows = self
            .reader
            .query_all_raw(statement(
                backend,
                &format!("SELECT {COLUMNS} FROM receivers WHERE {filter}"),
                values,
            ))
            .await?;
        rows.iter().map(receiver_of).collect()
    }
}

const COLUMNS: &str = "id, name, type, cluster_id, action, params, actor, channel, user_id, project_id, created_at, updated_at";

/// A JSON object column.
fn object(row: &QueryResult, column: &str) -> Result<Map<String, Value>> {
    let text: String = row.try_get("", column)?;
    match serde_json::from_str(&text) {
        Ok(Value::Object(object)) => Ok(object),
        _ => Err(Error::Database(format!(
            "stored receiver {column} is not a JSON object"
        ))),
    }
}

fn receiver_of(row: &QueryResult) -> Result<Receiver> {
    let id: String = row.try_get("", "id")?;
    let kind: String = row.try_get("", "type")?;
    let cluster_id: Option<String> = row.try_get("", "cluster_id")?;
    let stored =
        |what: &str, text: &str| Error::Database(format!("stored receiver {what} {text:?}"));
    Ok(Receiver {
        id: Uuid::parse_str(&id).map_err(|_| stored("id", &id))?,
        name: row.try_get("", "name")?,
        kind: ReceiverType::parse(&kind).map_err(|_| stored("type", &kind))?,
        cluster_id: cluster_id
            .map(|text| Uuid::parse_str(&text).map_err(|_| stored("cluster_id", &text)))
            .transpose()?,
        action: row.try_get("", "action")?,
        params: object(row, "params")?,
        actor: object(row, "actor")?,
        channel: object(row, "channel")?,
        user_id: row.try_get("", "user_id")?,
        project_id: row.try_get("", "project_id")?,
        created_at: row.try_get("", "created_at")?,
        updated_at: row.try_get::<Option<DateTime<Utc>>>("", "updated_at")?,
    })
}

/// Whether `text` can be the start of an id as stored (lowercase hex and
/// dashes): anything else is no short id, and never reaches a `LIKE`.
fn is_id_prefix(text: &str) -> bool {
    !text.is_empty()
        && text.len() < 36
        && text
            .chars()
            .all(|c| c.is_ascii_digit() || ('a'..='f').contains(&c) || c == '-')
}

/// Deletes the receivers of `cluster_id` and their messages, inside the
/// transaction that deletes the cluster (Senlin's CLUSTER_DELETE takes them
/// with it).
pub(crate) async fn delete_cluster_receivers(
    connection: &impl ConnectionTrait,
    cluster_id: Uuid,
) -> Result<()> {
    let backend = connection.get_database_backend();
    messages::delete_messages_of(
        connection,
        "cluster_id = $1",
        vec![cluster_id.to_string().into()],
    )
    .await?;
    connection
        .execute_raw(statement(
            backend,
            "DELETE FROM receivers WHERE cluster_id = $1",
            vec![cluster_id.to_string().into()],
        ))
        .await?;
    Ok(())
}

#[async_trait]
impl ReceiverStore for SqlReceiverStore {
    async fn insert_receiver(&self, receiver: &Receiver) -> Result<()> {
        let backend = self.connection.get_database_backend();
        self.connection
            .execute_raw(statement(
                backend,
                &format!(
                    "INSERT INTO receivers ({COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)"
                ),
                vec![
                    receiver.id.to_string().into(),
                    receiver.name.clone().into(),
                    receiver.kind.as_str().into(),
                    receiver.cluster_id.map(|id| id.to_string()).into(),
                    receiver.action.clone().into(),
                    Value::Object(receiver.params.clone()).to_string().into(),
                    Value::Object(receiver.actor.clone()).to_string().into(),
                    Value::Object(receiver.channel.clone()).to_string().into(),
                    receiver.user_id.clone().into(),
                    receiver.project_id.clone().into(),
                    receiver.created_at.into(),
                    receiver.updated_at.into(),
                ],
            ))
            .await?;
        Ok(())
    }

    async fn get_receiver(&self, id: Uuid) -> Result<Option<Receiver>> {
        Ok(self
            .select("id = $1", vec![id.to_string().into()])
            .await?
            .into_iter()
            .next())
    }

    async fn match_receivers(
        &self,
        project_id: Option<&str>,
        name_or_id: &str,
    ) -> Result<Vec<Receiver>> {
        // `condition` compares a column with `$1`; the project, if any, is `$2`.
        let scoped = |condition: &str, value: String| {
            let mut values: Vec<sea_orm::Value> = vec![value.into()];
            let mut filter = condition.to_owned();
            if let Some(project_id) = project_id {
                values.push(project_id.into());
                filter.push_str(" AND project_id = $2");
            }
            (filter, values)
        };
        if let Ok(id) = Uuid::parse_str(name_or_id) {
            let (filter, values) = scoped("id = $1", id.to_string());
            let found = self.select(&filter, values).await?;
            if !found.is_empty() {
                return Ok(found);
            }
        }
        let (filter, values) = scoped("name = $1", name_or_id.to_owned());
        let named = self
            .select(&format!("{filter} ORDER BY created_at, id LIMIT 2"), values)
            .await?;
        if !named.is_empty() || !is_id_prefix(name_or_id) {
            return Ok(named);
        }
        let (filter, values) = scoped("id LIKE $1", format!("{name_or_id}%"));
        self.select(&format!("{filter} ORDER BY created_at, id LIMIT 2"), values)
            .await
    }

    async fn list_receivers(&self, query: &ReceiverQuery) -> Result<Vec<Receiver>> {
        let mut conditions = vec!["1 = 1".to_owned()];
        let mut values: Vec<sea_orm::Value> = Vec::new();
        let filters = [
            ("project_id", query.project_id.clone()),
            ("name", query.name.clone()),
            ("type", query.kind.map(|kind| kind.as_str().to_owned())),
            ("cluster_id", query.cluster_id.clone()),
            ("action", query.action.clone()),
            ("user_id", query.user_id.clone()),
        ];
        for (column, value) in filters {
            if let Some(value) = value {
                values.push(value.into());
                conditions.push(format!("{column} = ${}", values.len()));
            }
        }
        let mut order: Vec<String> = query
            .sort
            .iter()
            .map(|(key, descending)| {
                format!(
                    "{} {}",
                    column(*key),
                    if *descending { "DESC" } else { "ASC" }
                )
            })
            .collect();
        order.extend(["created_at ASC".to_owned(), "id ASC".to_owned()]);
        let page = query.page_size();
        // Without a marker the page is the first rows; with one, the rows
        // after it in the same order (a project's receivers are few: one
        // per alarm or queue, not per node).
        let limit = if query.marker.is_none() {
            format!(" LIMIT {page}")
        } else {
            String::new()
        };
        let rows = self
            .select(
                &format!(
                    "{} ORDER BY {}{limit}",
                    conditions.join(" AND "),
                    order.join(", ")
                ),
                values,
            )
            .await?;
        match query.marker {
            None => Ok(rows),
            Some(marker) => {
                let Some(position) = rows.iter().position(|receiver| receiver.id == marker) else {
                    return Err(Error::InvalidInput(format!(
                        "marker {marker} is not a receiver of this listing"
                    )));
                };
                Ok(rows.into_iter().skip(position + 1).take(page).collect())
            }
        }
    }

    async fn update_receiver(&self, receiver: &Receiver) -> Result<bool> {
        let backend = self.connection.get_database_backend();
        let updated = self
            .connection
            .execute_raw(statement(
                backend,
                "UPDATE receivers SET name = $2, action = $3, params = $4, updated_at = $5 WHERE id = $1",
                vec![
                    receiver.id.to_string().into(),
                    receiver.name.clone().into(),
                    receiver.action.clone().into(),
                    Value::Object(receiver.params.clone()).to_string().into(),
                    receiver.updated_at.into(),
                ],
            ))
            .await?
            .rows_affected();
        Ok(updated > 0)
    }

    async fn delete_receiver(&self, id: Uuid) -> Result<bool> {
        let backend = self.connection.get_database_backend();
        let transaction = self.connection.begin().await?;
        messages::delete_messages_of(&transaction, "id = $1", vec![id.to_string().into()]).await?;
        let deleted = transaction
            .execute_raw(statement(
                backend,
                "DELETE FROM receivers WHERE id = $1",
                vec![id.to_string().into()],
            ))
            .await?
            .rows_affected();
        transaction.commit().await?;
        Ok(deleted > 0)
    }

    async fn post_messages(&self, receiver_id: Uuid, messages: &[ReceiverMessage]) -> Result<bool> {
        messages::post_messages(&self.connection, receiver_id, messages).await
    }

    async fn claim_messages(
        &self,
        receiver_id: Option<Uuid>,
        claim_token: Uuid,
        now: DateTime<Utc>,
        lease_until: DateTime<Utc>,
        limit: u64,
    ) -> Result<Vec<ReceiverMessage>> {
        messages::claim_messages(
            &self.connection,
            receiver_id,
            claim_token,
            now,
            lease_until,
            limit,
        )
        .await
    }

    async fn delete_claimed_message(&self, id: Uuid, claim_token: Uuid) -> Result<bool> {
        messages::delete_claimed_message(&self.connection, id, claim_token).await
    }

    async fn delete_expired_messages(&self, now: DateTime<Utc>) -> Result<Vec<ReceiverMessage>> {
        messages::delete_expired_messages(&self.connection, now).await
    }

    async fn list_messages(&self, receiver_id: Uuid) -> Result<Vec<ReceiverMessage>> {
        messages::list_messages(&self.reader, receiver_id).await
    }
}
