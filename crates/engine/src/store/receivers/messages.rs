//! The queues of message receivers in SQL: posting (all of a request's
//! messages or none, and only while the receiver exists), claiming with a
//! lease (one conditional `UPDATE … RETURNING`; on PostgreSQL the rows are
//! picked `FOR UPDATE SKIP LOCKED`, so replicas' claims never wait on each
//! other), the fenced delete after a message ran, and dropping expired
//! ones. Each claim has its own token: only the claim that ran a message
//! deletes it.

use chrono::{DateTime, Utc};
use sea_orm::{ConnectionTrait, DatabaseConnection, DbBackend, QueryResult, TransactionTrait};
use serde_json::Value;
use uuid::Uuid;

use crate::domain::receiver::{ReceiverMessage, ReceiverType};
use crate::error::{Error, Result};
use ember_runtime::database::statement;

const MESSAGE_COLUMNS: &str = "id, receiver_id, project_id, body, posted_at, expires_at";

fn message_of(row: &QueryResult) -> Result<ReceiverMessage> {
    let stored =
        |what: &str, text: &str| Error::Database(format!("stored message {what} {text:?}"));
    let id: String = row.try_get("", "id")?;
    let receiver_id: String = row.try_get("", "receiver_id")?;
    let body: String = row.try_get("", "body")?;
    let Ok(Value::Object(body)) = serde_json::from_str(&body) else {
        return Err(stored("body", &body));
    };
    Ok(ReceiverMessage {
        id: Uuid::parse_str(&id).map_err(|_| stored("id", &id))?,
        receiver_id: Uuid::parse_str(&receiver_id)
            .map_err(|_| stored("receiver_id", &receiver_id))?,
        project_id: row.try_get("", "project_id")?,
        body,
        posted_at: row.try_get("", "posted_at")?,
        expires_at: row.try_get("", "expires_at")?,
    })
}

/// Oldest first, as posted.
fn in_posting_order(mut messages: Vec<ReceiverMessage>) -> Vec<ReceiverMessage> {
    messages.sort_by_key(|message| (message.posted_at, message.id));
    messages
}

pub(super) async fn post_messages(
    connection: &DatabaseConnection,
    receiver_id: Uuid,
    messages: &[ReceiverMessage],
) -> Result<bool> {
    let backend = connection.get_database_backend();
    let transaction = connection.begin().await?;
    for message in messages {
        let inserted = transaction
            .execute_raw(statement(
                backend,
                &format!(
                    "INSERT INTO receiver_messages ({MESSAGE_COLUMNS}) \
                     SELECT $1, $2, $3, $4, $5, $6 WHERE EXISTS (\
                       SELECT 1 FROM receivers WHERE id = $2 AND type = $7)"
                ),
                vec![
                    message.id.to_string().into(),
                    receiver_id.to_string().into(),
                    message.project_id.clone().into(),
                    Value::Object(message.body.clone()).to_string().into(),
                    message.posted_at.into(),
                    message.expires_at.into(),
                    ReceiverType::Message.as_str().into(),
                ],
            ))
            .await?
            .rows_affected();
        if inserted == 0 {
            // The receiver went away meanwhile: nothing of the request stays.
            transaction.rollback().await?;
            return Ok(false);
        }
    }
    transaction.commit().await?;
    Ok(true)
}

pub(super) async fn claim_messages(
    connection: &DatabaseConnection,
    receiver_id: Option<Uuid>,
    claim_token: Uuid,
    now: DateTime<Utc>,
    lease_until: DateTime<Utc>,
    limit: u64,
) -> Result<Vec<ReceiverMessage>> {
    let backend = connection.get_database_backend();
    let skip_locked = if backend == DbBackend::Postgres {
        "FOR UPDATE SKIP LOCKED"
    } else {
        ""
    };
    let free = "expires_at > $3 AND (claimed_until IS NULL OR claimed_until < $3)";
    let mut values: Vec<sea_orm::Value> = vec![
        claim_token.to_string().into(),
        lease_until.into(),
        now.into(),
        i64::try_from(limit).unwrap_or(i64::MAX).into(),
    ];
    let of_receiver = match receiver_id {
        Some(receiver_id) => {
            values.push(receiver_id.to_string().into());
            " AND receiver_id = $5"
        }
        None => "",
    };
    let rows = connection
        .query_all_raw(statement(
            backend,
            &format!(
                "UPDATE receiver_messages SET claim_token = $1, claimed_until = $2 \
                 WHERE id IN (\
                   SELECT id FROM receiver_messages WHERE {free}{of_receiver} \
                   ORDER BY posted_at, id LIMIT $4 {skip_locked}) \
                 AND {free} \
                 RETURNING {MESSAGE_COLUMNS}"
            ),
            values,
        ))
        .await?;
    let claimed: Result<Vec<ReceiverMessage>> = rows.iter().map(message_of).collect();
    Ok(in_posting_order(claimed?))
}

pub(super) async fn delete_claimed_message(
    connection: &DatabaseConnection,
    id: Uuid,
    claim_token: Uuid,
) -> Result<bool> {
    let backend = connection.get_database_backend();
    let deleted = connection
        .execute_raw(statement(
            backend,
            "DELETE FROM receiver_messages WHERE id = $1 AND claim_token = $2",
            vec![id.to_string().into(), claim_token.to_string().into()],
        ))
        .await?
        .rows_affected();
    Ok(deleted > 0)
}

pub(super) async fn delete_expired_messages(
    connection: &DatabaseConnection,
    now: DateTime<Utc>,
) -> Result<Vec<ReceiverMessage>> {
    let backend = connection.get_database_backend();
    let rows = connection
        .query_all_raw(statement(
            backend,
            &format!(
                "DELETE FROM receiver_messages \
                 WHERE expires_at <= $1 AND (claimed_until IS NULL OR claimed_until < $1) \
                 RETURNING {MESSAGE_COLUMNS}"
            ),
            vec![now.into()],
        ))
        .await?;
    let expired: Result<Vec<ReceiverMessage>> = rows.iter().map(message_of).collect();
    Ok(in_posting_order(expired?))
}

pub(super) async fn list_messages(
    connection: &impl ConnectionTrait,
    receiver_id: Uuid,
) -> Result<Vec<ReceiverMessage>> {
    let backend = connection.get_database_backend();
    let rows = connection
        .query_all_raw(statement(
            backend,
            &format!(
                "SELECT {MESSAGE_COLUMNS} FROM receiver_messages WHERE receiver_id = $1 \
                 ORDER BY posted_at, id"
            ),
            vec![receiver_id.to_string().into()],
        ))
        .await?;
    rows.iter().map(message_of).collect()
}

/// Deletes the messages of the receivers `filter` picks (a condition on
/// `receivers` with its values), inside the caller's transaction.
pub(super) async fn delete_messages_of(
    connection: &impl ConnectionTrait,
    filter: &str,
    values: Vec<sea_orm::Value>,
) -> Result<()> {
    let backend = connection.get_database_backend();
    connection
        .execute_raw(statement(
            backend,
            &format!(
                "DELETE FROM receiver_messages WHERE receiver_id IN (\
                   SELECT id FROM receivers WHERE {filter})"
            ),
            values,
        ))
        .await?;
    Ok(())
}
