//! Persistence of delegations (see `domain::delegation`): one row per
//! owner. A nested stack acts through its root stack's delegation, found
//! by walking up its parents in one statement.

use async_trait::async_trait;
use sea_orm::{ConnectionTrait, DatabaseConnection};
use uuid::Uuid;

use crate::domain::delegation::{Delegation, DelegationOwner, TrustOwnership};
use crate::error::Result;
use ember_runtime::database::statement;

#[async_trait]
pub trait DelegationStore: Send + Sync + 'static {
    /// Records `owner`'s delegation (replacing one it had).
    async fn record_delegation(
        &self,
        owner: DelegationOwner,
        delegation: &Delegation,
        ownership: TrustOwnership,
    ) -> Result<()>;
    /// `owner`'s own delegation.
    async fn delegation_of(&self, owner: DelegationOwner) -> Result<Option<Delegation>>;
    /// The delegation a stack acts through: its own, or the nearest of its
    /// ancestors' (a nested stack's root's).
    async fn delegation_of_stack(&self, stack_id: Uuid) -> Result<Option<Delegation>>;
    /// Whether `owner`'s trust was made for it (deleted with it).
    async fn owns_trust(&self, owner: DelegationOwner) -> Result<bool>;
    /// Forgets `owner`'s delegation; false when it had none.
    async fn forget_delegation(&self, owner: DelegationOwner) -> Result<bool>;
}

pub struct SqlDelegationStore {
    connection: DatabaseConnection,
    reader: ember_runtime::database::Reader,
}

impl SqlDelegationStore {
    pub fn new(
        connection: DatabaseConnection,
        reader: impl Into<ember_runtime::database::Reader>,
    ) -> Self {
        SqlDelegationStore {
            connection,
            reader: reader.into(),
        }
    }
}

fn delegation_from(row: &sea_orm::QueryResult) -> Result<Delegation> {
    Ok(Delegation {
        trust_id: row.try_get("", "trust_id")?,
        trustor_user_id: row.try_get("", "trustor_user_id")?,
        project_id: row.try_get("", "project_id")?,
    })
}

#[async_trait]
impl DelegationStore for SqlDelegationStore {
    async fn record_delegation(
        &self,
        owner: DelegationOwner,
        delegation: &Delegation,
        ownership: TrustOwnership,
    ) -> Result<()> {
        let backend = self.connection.get_database_backend();
        self.connection
            .execute_raw(statement(
                backend,
                "INSERT INTO delegations (owner_kind, owner_id, trust_id, trustor_user_id, project_id, owns_trust, created_at) \
                 VALUES ($1, $2, $3, $4, $5, $6, $7) \
                 ON CONFLICT (owner_kind, owner_id) DO UPDATE SET trust_id = excluded.trust_id, \
                 trustor_user_id = excluded.trustor_user_id, project_id = excluded.project_id, \
                 owns_trust = excluded.owns_trust, created_at = excluded.created_at",
                vec![
                    owner.kind().into(),
                    owner.id().into(),
                    delegation.trust_id.clone().into(),
                    delegation.trustor_user_id.clone().into(),
                    delegation.project_id.clone().into(),
                    (ownership == TrustOwnership::Owns).into(),
                    chrono::Utc::now().into(),
                ],
            ))
            .await?;
        Ok(())
    }

    async fn owns_trust(&self, owner: DelegationOwner) -> Result<bool> {
        let backend = self.reader.get_database_backend();
        let row = self
            .reader
            .query_one_raw(statement(
                backend,
                "SELECT owns_trust FROM delegations WHERE owner_kind = $1 AND owner_id = $2",
                vec![owner.kind().into(), owner.id().into()],
            ))
            .await?;
        match row {
            Some(row) => Ok(row.try_get("", "owns_trust")?),
            None => Ok(false),
        }
    }

    async fn delegation_of(&self, owner: DelegationOwner) -> Result<Option<Delegation>> {
        let backend = self.reader.get_database_backend();
        let row = self
            .reader
            .query_one_raw(statement(
                backend,
                "SELECT trust_id, trustor_user_id, project_id FROM delegations \
                 WHERE owner_kind = $1 AND owner_id = $2",
                vec![owner.kind().into(), owner.id().into()],
            ))
            .await?;
        row.as_ref().map(delegation_from).transpose()
    }

    async fn delegation_of_stack(&self, stack_id: Uuid) -> Result<Option<Delegation>> {
        let backend = self.reader.get_database_backend();
        let row = self
            .reader
            .query_one_raw(statement(
                backend,
                "WITH RECURSIVE chain (id, parent_id, depth) AS ( \
                   SELECT id, parent_id, 0 FROM stacks WHERE id = $1 \
                   UNION ALL \
                   SELECT stacks.id, stacks.parent_id, chain.depth + 1 FROM stacks \
                   JOIN chain ON stacks.id = chain.parent_id WHERE chain.depth < 64 \
                 ) \
                 SELECT d.trust_id, d.trustor_user_id, d.project_id FROM delegations d \
                 JOIN chain ON d.owner_kind = 'stack' AND d.owner_id = chain.id \
                 ORDER BY chain.depth LIMIT 1",
                vec![stack_id.into()],
            ))
            .await?;
        row.as_ref().map(delegation_from).transpose()
    }

    async fn forget_delegation(&self, owner: DelegationOwner) -> Result<bool> {
        let backend = self.connection.get_database_backend();
        let done = self
            .connection
            .execute_raw(statement(
                backend,
                "DELETE FROM delegations WHERE owner_kind = $1 AND owner_id = $2",
                vec![owner.kind().into(), owner.id().into()],
            ))
            .await?;
        Ok(done.rows_affected() > 0)
    }
}
