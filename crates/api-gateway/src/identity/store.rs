//! The identity store: SQLite (the embedded default) or PostgreSQL, like
//! every Ember store. Deleting a user or project, changing a password or
//! taking a role away writes the matching revocation in the same
//! transaction, so no token outlives the right it stood for.

use chrono::{DateTime, Utc};
use sea_orm::{
    ConnectionTrait, DatabaseBackend, DatabaseConnection, DbErr, QueryResult, TransactionTrait,
};

use ember_runtime::database::statement;

use super::{Assignment, IdentityError, Project, Revocation, User};

type Result<T> = std::result::Result<T, IdentityError>;

impl From<DbErr> for IdentityError {
    fn from(error: DbErr) -> Self {
        IdentityError::Database(ember_runtime::error::with_causes(
            error.to_string(),
            std::error::Error::source(&error),
        ))
    }
}

#[derive(Clone, Debug)]
pub struct IdentityStore {
    connection: DatabaseConnection,
}

fn is_unique_violation(error: &DbErr) -> bool {
    let text = error.to_string().to_ascii_lowercase();
    text.contains("unique") || text.contains("duplicate key")
}

const PROJECT_COLUMNS: &str = "id, name, description, created_at";
const USER_COLUMNS: &str =
    "id, name, password_hash, default_project_id, created_at, failed_auth_count, failed_auth_at";

fn project_of(row: &QueryResult) -> Result<Project> {
    Ok(Project {
        id: row.try_get("", "id")?,
        name: row.try_get("", "name")?,
        description: row.try_get("", "description")?,
        created_at: row.try_get("", "created_at")?,
    })
}

fn user_of(row: &QueryResult) -> Result<User> {
    Ok(User {
        id: row.try_get("", "id")?,
        name: row.try_get("", "name")?,
        password_hash: row.try_get("", "password_hash")?,
        default_project_id: row.try_get("", "default_project_id")?,
        created_at: row.try_get("", "created_at")?,
        failed_auth_count: row.try_get("", "failed_auth_count")?,
        failed_auth_at: row.try_get("", "failed_auth_at")?,
    })
}

impl IdentityStore {
    /// Connects to `url` (waiting for it until `shutdown`, see
    /// `connect_and_migrate_patiently`) and applies the gateway's
    /// migrations.
    pub async fn open(
        url: &str,
        shutdown: &tokio_util::sync::CancellationToken,
    ) -> std::result::Result<IdentityStore, String> {
        let connection = ember_runtime::database::connect_and_migrate_patiently::<
            super::migrations::Migrator,
        >(url, shutdown)
        .await
        .map_err(|error| error.to_string())?;
        Ok(IdentityStore { connection })
    }

    pub fn connection(&self) -> &DatabaseConnection {
        &self.connection
    }

    fn backend(&self) -> DatabaseBackend {
        self.connection.get_database_backend()
    }

    pub async fn create_project(&self, project: &Project) -> Result<()> {
        let result = self
            .connection
            .execute_raw(statement(
                self.backend(),
                "INSERT INTO identity_projects (id, name, description, created_at) VALUES ($1, $2, $3, $4)",
                vec![
                    project.id.clone().into(),
                    project.name.clone().into(),
                    project.description.clone().into(),
                    project.created_at.into(),
                ],
            ))
            .await;
        match result {
            Ok(_) => Ok(()),
            Err(error) if is_unique_violation(&error) => Err(IdentityError::Conflict(format!(
                "a project named {:?} or with id {:?} already exists",
                project.name, project.id
            ))),
            Err(error) => Err(error.into()),
        }
    }

    pub async fn list_projects(&self) -> Result<Vec<Project>> {
        let rows = self
            .connection
            .query_all_raw(statement(
                self.backend(),
                &format!("SELECT {PROJECT_COLUMNS} FROM identity_projects ORDER BY name"),
                vec![],
            ))
            .await?;
        rows.iter().map(project_of).collect()
    }

    /// The project with this id, or else this name.
    pub async fn find_project(&self, name_or_id: &str) -> Result<Option<Project>> {
        let rows = self
            .connection
            .query_all_raw(statement(
                self.backend(),
                &format!(
                    "SELECT {PROJECT_COLUMNS} FROM identity_projects WHERE id = $1 OR name = $1"
                ),
                vec![name_or_id.into()],
            ))
            .await?;
        let projects = rows.iter().map(project_of).collect::<Result<Vec<_>>>()?;
        Ok(pick(projects, |project| project.id == name_or_id))
    }

    pub async fn project_by_id(&self, id: &str) -> Result<Option<Project>> {
        self.project_where("id", id).await
    }

    pub async fn project_by_name(&self, name: &str) -> Result<Option<Project>> {
        self.project_where("name", name).await
    }

    async fn project_where(&self, column: &str, value: &str) -> Result<Option<Project>> {
        let row = self
            .connection
            .query_one_raw(statement(
                self.backend(),
                &format!("SELECT {PROJECT_COLUMNS} FROM identity_projects WHERE {column} = $1"),
                vec![value.into()],
            ))
            .await?;
        row.as_ref().map(project_of).transpose()
    }

    /// Deletes a project, its role assignments, and revokes its tokens.
    pub async fn delete_project(
        &self,
        project: &Project,
        revocation_expiry: DateTime<Utc>,
    ) -> Result<()> {
        let transaction = self.connection.begin().await?;
        let backend = transaction.get_database_backend();
        transaction
            .execute_raw(statement(
                backend,
                "DELETE FROM identity_role_assignments WHERE project_id = $1",
                vec![project.id.clone().into()],
            ))
            .await?;
        transaction
            .execute_raw(statement(
                backend,
                "UPDATE identity_users SET default_project_id = NULL WHERE default_project_id = $1",
                vec![project.id.clone().into()],
            ))
            .await?;
        let deleted = transaction
            .execute_raw(statement(
                backend,
                "DELETE FROM identity_projects WHERE id = $1",
                vec![project.id.clone().into()],
            ))
            .await?
            .rows_affected();
        if deleted == 0 {
            return Err(IdentityError::NotFound(format!(
                "project {:?}",
                project.name
            )));
        }
        insert_revocation(
            &transaction,
            None,
            None,
            Some(&project.id),
            revocation_expiry,
        )
        .await?;
        transaction.commit().await?;
        Ok(())
    }

    pub async fn create_user(&self, user: &User) -> Result<()> {
        let result = self
            .connection
            .execute_raw(statement(
                self.backend(),
                "INSERT INTO identity_users (id, name, password_hash, default_project_id, created_at) \
                 VALUES ($1, $2, $3, $4, $5)",
                vec![
                    user.id.clone().into(),
                    user.name.clone().into(),
                    user.password_hash.clone().into(),
                    user.default_project_id.clone().into(),
                    user.created_at.into(),
                ],
            ))
            .await;
        match result {
            Ok(_) => Ok(()),
            Err(error) if is_unique_violation(&error) => Err(IdentityError::Conflict(format!(
                "a user named {:?} or with id {:?} already exists",
                user.name, user.id
            ))),
            Err(error) => Err(error.into()),
        }
    }

    pub async fn list_users(&self) -> Result<Vec<User>> {
        let rows = self
            .connection
            .query_all_raw(statement(
                self.backend(),
                &format!("SELECT {USER_COLUMNS} FROM identity_users ORDER BY name"),
                vec![],
            ))
            .await?;
        rows.iter().map(user_of).collect()
    }

    /// The user with this id, or else this name.
    pub async fn find_user(&self, name_or_id: &str) -> Result<Option<User>> {
        let rows = self
            .connection
            .query_all_raw(statement(
                self.backend(),
                &format!("SELECT {USER_COLUMNS} FROM identity_users WHERE id = $1 OR name = $1"),
                vec![name_or_id.into()],
            ))
            .await?;
        let users = rows.iter().map(user_of).collect::<Result<Vec<_>>>()?;
        Ok(pick(users, |user| user.id == name_or_id))
    }

    pub async fn user_by_id(&self, id: &str) -> Result<Option<User>> {
        self.user_where("id", id).await
    }

    pub async fn user_by_name(&self, name: &str) -> Result<Option<User>> {
        self.user_where("name", name).await
    }

    async fn user_where(&self, column: &str, value: &str) -> Result<Option<User>> {
        let row = self
            .connection
            .query_one_raw(statement(
                self.backend(),
                &format!("SELECT {USER_COLUMNS} FROM identity_users WHERE {column} = $1"),
                vec![value.into()],
            ))
            .await?;
        row.as_ref().map(user_of).transpose()
    }

    /// Deletes a user, its role assignments, and revokes its tokens.
    pub async fn delete_user(&self, user: &User, revocation_expiry: DateTime<Utc>) -> Result<()> {
        let transaction = self.connection.begin().await?;
        let backend = transaction.get_database_backend();
        transaction
            .execute_raw(statement(
                backend,
                "DELETE FROM identity_role_assignments WHERE user_id = $1",
                vec![user.id.clone().into()],
            ))
            .await?;
        let deleted = transaction
            .execute_raw(statement(
                backend,
                "DELETE FROM identity_users WHERE id = $1",
                vec![user.id.clone().into()],
            ))
            .await?
            .rows_affected();
        if deleted == 0 {
            return Err(IdentityError::NotFound(format!("user {:?}", user.name)));
        }
        insert_revocation(&transaction, None, Some(&user.id), None, revocation_expiry).await?;
        transaction.commit().await?;
        Ok(())
    }

    /// Counts a wrong password of `user_id` at `now`; returns how many it
    /// got wrong in a row (0 when there is no such user any more).
    pub async fn record_failed_auth(&self, user_id: &str, now: DateTime<Utc>) -> Result<i32> {
        let row = self
            .connection
            .query_one_raw(statement(
                self.backend(),
                "UPDATE identity_users SET failed_auth_count = failed_auth_count + 1, \
                 failed_auth_at = $1 WHERE id = $2 RETURNING failed_auth_count",
                vec![now.into(), user_id.into()],
            ))
            .await?;
        Ok(match row {
            Some(row) => row.try_get("", "failed_auth_count")?,
            None => 0,
        })
    }

    /// Forgets a user's wrong passwords (a right one, an unlock, a new
    /// password, a lockout that ran out); false when there is no such user.
    pub async fn reset_failed_auth(&self, user_id: &str) -> Result<bool> {
        Ok(self
            .connection
            .execute_raw(statement(
                self.backend(),
                "UPDATE identity_users SET failed_auth_count = 0, failed_auth_at = NULL WHERE id = $1",
                vec![user_id.into()],
            ))
            .await?
            .rows_affected()
            > 0)
    }

    /// Replaces a user's password hash and revokes the tokens it had.
    pub async fn set_password(
        &self,
        user: &User,
        password_hash: &str,
        revocation_expiry: DateTime<Utc>,
    ) -> Result<()> {
        let transaction = self.connection.begin().await?;
        let backend = transaction.get_database_backend();
        let updated = transaction
            .execute_raw(statement(
                backend,
                "UPDATE identity_users SET password_hash = $1, failed_auth_count = 0, \
                 failed_auth_at = NULL WHERE id = $2",
                vec![password_hash.into(), user.id.clone().into()],
            ))
            .await?
            .rows_affected();
        if updated == 0 {
            return Err(IdentityError::NotFound(format!("user {:?}", user.name)));
        }
        insert_revocation(&transaction, None, Some(&user.id), None, revocation_expiry).await?;
        transaction.commit().await?;
        Ok(())
    }

    /// Gives a role; giving it again changes nothing.
    pub async fn add_role(&self, assignment: &Assignment) -> Result<()> {
        let backend = self.backend();
        self.connection
            .execute_raw(statement(
                backend,
                "INSERT INTO identity_role_assignments (user_id, project_id, role) VALUES ($1, $2, $3) \
                 ON CONFLICT (user_id, project_id, role) DO NOTHING",
                vec![
                    assignment.user_id.clone().into(),
                    assignment.project_id.clone().into(),
                    assignment.role.clone().into(),
                ],
            ))
            .await?;
        Ok(())
    }

    /// Takes a role away and revokes the user's tokens for the project;
    /// false when the user did not have it.
    pub async fn remove_role(
        &self,
        assignment: &Assignment,
        revocation_expiry: DateTime<Utc>,
    ) -> Result<bool> {
        let transaction = self.connection.begin().await?;
        let backend = transaction.get_database_backend();
        let removed = transaction
            .execute_raw(statement(
                backend,
                "DELETE FROM identity_role_assignments WHERE user_id = $1 AND project_id = $2 AND role = $3",
                vec![
                    assignment.user_id.clone().into(),
                    assignment.project_id.clone().into(),
                    assignment.role.clone().into(),
                ],
            ))
            .await?
            .rows_affected();
        if removed == 0 {
            return Ok(false);
        }
        insert_revocation(
            &transaction,
            None,
            Some(&assignment.user_id),
            Some(&assignment.project_id),
            revocation_expiry,
        )
        .await?;
        transaction.commit().await?;
        Ok(true)
    }

    /// The roles a user has on a project, sorted.
    pub async fn roles_of(&self, user_id: &str, project_id: &str) -> Result<Vec<String>> {
        let rows = self
            .connection
            .query_all_raw(statement(
                self.backend(),
                "SELECT role FROM identity_role_assignments WHERE user_id = $1 AND project_id = $2 ORDER BY role",
                vec![user_id.into(), project_id.into()],
            ))
            .await?;
        rows.iter()
            .map(|row| Ok(row.try_get("", "role")?))
            .collect()
    }

    /// Role assignments, of one user and/or one project when given.
    pub async fn list_assignments(
        &self,
        user_id: Option<&str>,
        project_id: Option<&str>,
    ) -> Result<Vec<Assignment>> {
        let rows = self
            .connection
            .query_all_raw(statement(
                self.backend(),
                "SELECT user_id, project_id, role FROM identity_role_assignments \
                 WHERE ($1 = '' OR user_id = $1) AND ($2 = '' OR project_id = $2) \
                 ORDER BY user_id, project_id, role",
                vec![
                    user_id.unwrap_or_default().into(),
                    project_id.unwrap_or_default().into(),
                ],
            ))
            .await?;
        rows.iter()
            .map(|row| {
                Ok(Assignment {
                    user_id: row.try_get("", "user_id")?,
                    project_id: row.try_get("", "project_id")?,
                    role: row.try_get("", "role")?,
                })
            })
            .collect()
    }

    /// Revokes one token (by its id) until it would have expired anyway.
    pub async fn revoke_token(&self, token_id: &str, expires_at: DateTime<Utc>) -> Result<()> {
        insert_revocation(&self.connection, Some(token_id), None, None, expires_at).await
    }

    /// Revocations written after `after` (an id), oldest first, leaving out
    /// those whose tokens have all expired.
    pub async fn revocations_after(&self, after: i64) -> Result<Vec<Revocation>> {
        let rows = self
            .connection
            .query_all_raw(statement(
                self.backend(),
                "SELECT id, token_id, user_id, project_id, issued_before, expires_at \
                 FROM identity_revocations WHERE id > $1 ORDER BY id",
                vec![after.into()],
            ))
            .await?;
        rows.iter()
            .map(|row| {
                Ok(Revocation {
                    id: row.try_get("", "id")?,
                    token_id: row.try_get("", "token_id")?,
                    user_id: row.try_get("", "user_id")?,
                    project_id: row.try_get("", "project_id")?,
                    issued_before: row.try_get("", "issued_before")?,
                    expires_at: row.try_get("", "expires_at")?,
                })
            })
            .collect()
    }

    /// Forgets revocations whose tokens have all expired.
    pub async fn prune_revocations(&self, now: DateTime<Utc>) -> Result<u64> {
        Ok(self
            .connection
            .execute_raw(statement(
                self.backend(),
                "DELETE FROM identity_revocations WHERE expires_at < $1",
                vec![now.into()],
            ))
            .await?
            .rows_affected())
    }
}

/// Of the rows matching by id or by name, the one matching by id wins (a
/// project may be named like another's id).
fn pick<T>(mut found: Vec<T>, by_id: impl Fn(&T) -> bool) -> Option<T> {
    match found.iter().position(by_id) {
        Some(index) => Some(found.swap_remove(index)),
        None => found.into_iter().next(),
    }
}

async fn insert_revocation(
    connection: &impl ConnectionTrait,
    token_id: Option<&str>,
    user_id: Option<&str>,
    project_id: Option<&str>,
    expires_at: DateTime<Utc>,
) -> Result<()> {
    let backend = connection.get_database_backend();
    connection
        .execute_raw(statement(
            backend,
            "INSERT INTO identity_revocations (token_id, user_id, project_id, issued_before, expires_at) \
             VALUES ($1, $2, $3, $4, $5)",
            vec![
                token_id.map(str::to_owned).into(),
                user_id.map(str::to_owned).into(),
                project_id.map(str::to_owned).into(),
                Utc::now().timestamp_millis().into(),
                expires_at.into(),
            ],
        ))
        .await?;
    Ok(())
}
