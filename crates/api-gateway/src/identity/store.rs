//! The identity store: SQLite (the embedded default) or PostgreSQL, like
//! every Ember store. Whatever takes a right away — deleting a user, a
//! project, a role or a group, changing a password, taking a role or a
//! membership away, disabling a user or a project — writes the matching
//! revocations in the same transaction, so no token outlives the right it
//! stood for.

use chrono::{DateTime, Utc};
use sea_orm::{
    ConnectionTrait, DatabaseBackend, DatabaseConnection, DbErr, QueryResult, TransactionTrait,
};

use ember_runtime::database::statement;

use super::{
    Assignee, Assignment, Group, GroupChanges, IdentityError, Project, ProjectChanges, Revocation,
    Role, User, UserChanges,
};

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

/// `error` as the caller sees it: a duplicate named by `duplicate`.
/// A create's unique violation, naming what clashed: the name, or the id
/// the caller gave (a generated one never clashes).
fn duplicate_of(error: DbErr, kind: &str, name: &str, id: &str) -> IdentityError {
    if !is_unique_violation(&error) {
        return error.into();
    }
    // SQLite says `…: identity_projects.name`, PostgreSQL names the
    // constraint `identity_projects_name_key`.
    IdentityError::AlreadyExists(if error.to_string().contains("name") {
        format!("a {kind} named {name:?} already exists")
    } else {
        format!("a {kind} with id {id:?} already exists")
    })
}

fn duplicate_or(error: DbErr, duplicate: impl FnOnce() -> String) -> IdentityError {
    if is_unique_violation(&error) {
        IdentityError::AlreadyExists(duplicate())
    } else {
        error.into()
    }
}

const PROJECT_COLUMNS: &str = "id, name, description, created_at, enabled";
const USER_COLUMNS: &str = "id, name, password_hash, default_project_id, created_at, \
     failed_auth_count, failed_auth_at, description, email, enabled";
const ROLE_COLUMNS: &str = "id, name";
const GROUP_COLUMNS: &str = "id, name, description, created_at";

fn project_of(row: &QueryResult) -> Result<Project> {
    Ok(Project {
        id: row.try_get("", "id")?,
        name: row.try_get("", "name")?,
        description: row.try_get("", "description")?,
        created_at: row.try_get("", "created_at")?,
        enabled: row.try_get("", "enabled")?,
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
        description: row.try_get("", "description")?,
        email: row.try_get("", "email")?,
        enabled: row.try_get("", "enabled")?,
    })
}

fn role_of(row: &QueryResult) -> Result<Role> {
    Ok(Role {
        id: row.try_get("", "id")?,
        name: row.try_get("", "name")?,
    })
}

fn group_of(row: &QueryResult) -> Result<Group> {
    Ok(Group {
        id: row.try_get("", "id")?,
        name: row.try_get("", "name")?,
        description: row.try_get("", "description")?,
        created_at: row.try_get("", "created_at")?,
    })
}

/// A user and a project whose tokens together lose a right.
type UserOnProject = (String, String);

fn user_on_project_of(row: &QueryResult) -> Result<UserOnProject> {
    Ok((row.try_get("", "user_id")?, row.try_get("", "project_id")?))
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

    /// The rows `sql` selects with `values`, each read by `read`.
    async fn select<T>(
        &self,
        sql: &str,
        values: Vec<sea_orm::Value>,
        read: fn(&QueryResult) -> Result<T>,
    ) -> Result<Vec<T>> {
        let rows = self
            .connection
            .query_all_raw(statement(self.backend(), sql, values))
            .await?;
        rows.iter().map(read).collect()
    }

    pub async fn create_project(&self, project: &Project) -> Result<()> {
        self.connection
            .execute_raw(statement(
                self.backend(),
                "INSERT INTO identity_projects (id, name, description, created_at, enabled) \
                 VALUES ($1, $2, $3, $4, $5)",
                vec![
                    project.id.clone().into(),
                    project.name.clone().into(),
                    project.description.clone().into(),
                    project.created_at.into(),
                    project.enabled.into(),
                ],
            ))
            .await
            .map_err(|error| duplicate_of(error, "project", &project.name, &project.id))?;
        Ok(())
    }

    pub async fn list_projects(&self) -> Result<Vec<Project>> {
        self.select(
            &format!("SELECT {PROJECT_COLUMNS} FROM identity_projects ORDER BY name"),
            vec![],
            project_of,
        )
        .await
    }

    /// The enabled projects a user holds a role on, its own or its
    /// groups' (what `GET /v3/auth/projects` lists).
    pub async fn projects_of(&self, user_id: &str) -> Result<Vec<Project>> {
        self.select(
            &format!(
                "SELECT {PROJECT_COLUMNS} FROM identity_projects WHERE enabled AND id IN \
                 (SELECT project_id FROM identity_role_assignments WHERE user_id = $1 \
                  UNION SELECT roles.project_id FROM identity_group_role_assignments roles \
                  JOIN identity_group_members members ON members.group_id = roles.group_id \
                  WHERE members.user_id = $1) ORDER BY name"
            ),
            vec![user_id.into()],
            project_of,
        )
        .await
    }

    /// The project with this id, or else this name.
    pub async fn find_project(&self, name_or_id: &str) -> Result<Option<Project>> {
        let projects = self
            .select(
                &format!(
                    "SELECT {PROJECT_COLUMNS} FROM identity_projects WHERE id = $1 OR name = $1"
                ),
                vec![name_or_id.into()],
                project_of,
            )
            .await?;
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

    /// Applies `changes` to the project `id` (fields left `None` keep
    /// theirs); disabling it revokes its tokens. `None` when there is no
    /// such project.
    pub async fn update_project(
        &self,
        id: &str,
        changes: &ProjectChanges,
        revocation_expiry: DateTime<Utc>,
    ) -> Result<Option<Project>> {
        let transaction = self.connection.begin().await?;
        let row = transaction
            .query_one_raw(statement(
                transaction.get_database_backend(),
                &format!(
                    "UPDATE identity_projects SET name = COALESCE($2, name), \
                     description = COALESCE($3, description), enabled = COALESCE($4, enabled) \
                     WHERE id = $1 RETURNING {PROJECT_COLUMNS}"
                ),
                vec![
                    id.into(),
                    changes.name.clone().into(),
                    changes.description.clone().into(),
                    changes.enabled.into(),
                ],
            ))
            .await
            .map_err(|error| {
                duplicate_or(error, || {
                    format!(
                        "a project named {:?} already exists",
                        changes.name.as_deref().unwrap_or_default()
                    )
                })
            })?;
        let Some(row) = row else {
            return Ok(None);
        };
        let project = project_of(&row)?;
        if changes.enabled == Some(false) {
            insert_revocation(&transaction, None, None, Some(id), revocation_expiry).await?;
        }
        transaction.commit().await?;
        Ok(Some(project))
    }

    /// Deletes a project, its role assignments (users' and groups'), and
    /// revokes its tokens.
    pub async fn delete_project(
        &self,
        project: &Project,
        revocation_expiry: DateTime<Utc>,
    ) -> Result<()> {
        let transaction = self.connection.begin().await?;
        let backend = transaction.get_database_backend();
        for sql in [
            "DELETE FROM identity_role_assignments WHERE project_id = $1",
            "DELETE FROM identity_group_role_assignments WHERE project_id = $1",
            "UPDATE identity_users SET default_project_id = NULL WHERE default_project_id = $1",
        ] {
            transaction
                .execute_raw(statement(backend, sql, vec![project.id.clone().into()]))
                .await?;
        }
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
        self.connection
            .execute_raw(statement(
                self.backend(),
                "INSERT INTO identity_users (id, name, password_hash, default_project_id, created_at, \
                 description, email, enabled) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
                vec![
                    user.id.clone().into(),
                    user.name.clone().into(),
                    user.password_hash.clone().into(),
                    user.default_project_id.clone().into(),
                    user.created_at.into(),
                    user.description.clone().into(),
                    user.email.clone().into(),
                    user.enabled.into(),
                ],
            ))
            .await
            .map_err(|error| {
                duplicate_of(error, "user", &user.name, &user.id)
            })?;
        Ok(())
    }

    pub async fn list_users(&self) -> Result<Vec<User>> {
        self.select(
            &format!("SELECT {USER_COLUMNS} FROM identity_users ORDER BY name"),
            vec![],
            user_of,
        )
        .await
    }

    /// The user with this id, or else this name.
    pub async fn find_user(&self, name_or_id: &str) -> Result<Option<User>> {
        let users = self
            .select(
                &format!("SELECT {USER_COLUMNS} FROM identity_users WHERE id = $1 OR name = $1"),
                vec![name_or_id.into()],
                user_of,
            )
            .await?;
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

    /// Applies `changes` to the user `id` (fields left `None` keep
    /// theirs); disabling it revokes its tokens. `None` when there is no
    /// such user.
    pub async fn update_user(
        &self,
        id: &str,
        changes: &UserChanges,
        revocation_expiry: DateTime<Utc>,
    ) -> Result<Option<User>> {
        let transaction = self.connection.begin().await?;
        // A nullable field is written when its flag says it was given, so
        // that it can be cleared.
        let row = transaction
            .query_one_raw(statement(
                transaction.get_database_backend(),
                &format!(
                    "UPDATE identity_users SET name = COALESCE($2, name), \
                     enabled = COALESCE($3, enabled), \
                     description = CASE WHEN $4 THEN $5 ELSE description END, \
                     email = CASE WHEN $6 THEN $7 ELSE email END, \
                     default_project_id = CASE WHEN $8 THEN $9 ELSE default_project_id END \
                     WHERE id = $1 RETURNING {USER_COLUMNS}"
                ),
                vec![
                    id.into(),
                    changes.name.clone().into(),
                    changes.enabled.into(),
                    changes.description.is_some().into(),
                    changes.description.clone().flatten().into(),
                    changes.email.is_some().into(),
                    changes.email.clone().flatten().into(),
                    changes.default_project_id.is_some().into(),
                    changes.default_project_id.clone().flatten().into(),
                ],
            ))
            .await
            .map_err(|error| {
                duplicate_or(error, || {
                    format!(
                        "a user named {:?} already exists",
                        changes.name.as_deref().unwrap_or_default()
                    )
                })
            })?;
        let Some(row) = row else {
            return Ok(None);
        };
        let user = user_of(&row)?;
        if changes.enabled == Some(false) {
            insert_revocation(&transaction, None, Some(id), None, revocation_expiry).await?;
        }
        transaction.commit().await?;
        Ok(Some(user))
    }

    /// Deletes a user, its role assignments and group memberships, and
    /// revokes its tokens.
    pub async fn delete_user(&self, user: &User, revocation_expiry: DateTime<Utc>) -> Result<()> {
        let transaction = self.connection.begin().await?;
        let backend = transaction.get_database_backend();
        for sql in [
            "DELETE FROM identity_role_assignments WHERE user_id = $1",
            "DELETE FROM identity_group_members WHERE user_id = $1",
        ] {
            transaction
                .execute_raw(statement(backend, sql, vec![user.id.clone().into()]))
                .await?;
        }
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

    pub async fn create_role(&self, role: &Role) -> Result<()> {
        self.connection
            .execute_raw(statement(
                self.backend(),
                "INSERT INTO identity_roles (id, name) VALUES ($1, $2)",
                vec![role.id.clone().into(), role.name.clone().into()],
            ))
            .await
            .map_err(|error| duplicate_of(error, "role", &role.name, &role.id))?;
        Ok(())
    }

    pub async fn list_roles(&self) -> Result<Vec<Role>> {
        self.select(
            &format!("SELECT {ROLE_COLUMNS} FROM identity_roles ORDER BY name"),
            vec![],
            role_of,
        )
        .await
    }

    /// The role with this id, or else this name.
    pub async fn find_role(&self, name_or_id: &str) -> Result<Option<Role>> {
        let roles = self
            .select(
                &format!("SELECT {ROLE_COLUMNS} FROM identity_roles WHERE id = $1 OR name = $1"),
                vec![name_or_id.into()],
                role_of,
            )
            .await?;
        Ok(pick(roles, |role| role.id == name_or_id))
    }

    /// Renames a role and the assignments naming it; the tokens of those
    /// holding it, which carry the old name, are revoked. `None` when there
    /// is no such role.
    pub async fn rename_role(
        &self,
        role: &Role,
        name: &str,
        revocation_expiry: DateTime<Utc>,
    ) -> Result<Option<Role>> {
        let transaction = self.connection.begin().await?;
        let backend = transaction.get_database_backend();
        let renamed = transaction
            .execute_raw(statement(
                backend,
                "UPDATE identity_roles SET name = $2 WHERE id = $1",
                vec![role.id.clone().into(), name.into()],
            ))
            .await
            .map_err(|error| {
                duplicate_or(error, || format!("a role named {name:?} already exists"))
            })?
            .rows_affected();
        if renamed == 0 {
            return Ok(None);
        }
        let holders = holders_of_role(&transaction, &role.name).await?;
        for sql in [
            "UPDATE identity_role_assignments SET role = $2 WHERE role = $1",
            "UPDATE identity_group_role_assignments SET role = $2 WHERE role = $1",
        ] {
            transaction
                .execute_raw(statement(
                    backend,
                    sql,
                    vec![role.name.clone().into(), name.into()],
                ))
                .await?;
        }
        insert_revocations(&transaction, &holders, revocation_expiry).await?;
        transaction.commit().await?;
        Ok(Some(Role {
            id: role.id.clone(),
            name: name.to_owned(),
        }))
    }

    /// Deletes a role and every assignment of it, and revokes the tokens
    /// of those who held it; false when there is no such role.
    pub async fn delete_role(&self, role: &Role, revocation_expiry: DateTime<Utc>) -> Result<bool> {
        let transaction = self.connection.begin().await?;
        let holders = holders_of_role(&transaction, &role.name).await?;
        delete_revoking(
            transaction,
            &[
                "DELETE FROM identity_role_assignments WHERE role = $1",
                "DELETE FROM identity_group_role_assignments WHERE role = $1",
            ],
            &role.name,
            ("DELETE FROM identity_roles WHERE id = $1", &role.id),
            &holders,
            revocation_expiry,
        )
        .await
    }

    pub async fn create_group(&self, group: &Group) -> Result<()> {
        self.connection
            .execute_raw(statement(
                self.backend(),
                "INSERT INTO identity_groups (id, name, description, created_at) VALUES ($1, $2, $3, $4)",
                vec![
                    group.id.clone().into(),
                    group.name.clone().into(),
                    group.description.clone().into(),
                    group.created_at.into(),
                ],
            ))
            .await
            .map_err(|error| {
                duplicate_of(error, "group", &group.name, &group.id)
            })?;
        Ok(())
    }

    pub async fn list_groups(&self) -> Result<Vec<Group>> {
        self.select(
            &format!("SELECT {GROUP_COLUMNS} FROM identity_groups ORDER BY name"),
            vec![],
            group_of,
        )
        .await
    }

    /// The group with this id, or else this name.
    pub async fn find_group(&self, name_or_id: &str) -> Result<Option<Group>> {
        let groups = self
            .select(
                &format!("SELECT {GROUP_COLUMNS} FROM identity_groups WHERE id = $1 OR name = $1"),
                vec![name_or_id.into()],
                group_of,
            )
            .await?;
        Ok(pick(groups, |group| group.id == name_or_id))
    }

    /// Applies `changes` to the group `id`; `None` when there is no such
    /// group.
    pub async fn update_group(&self, id: &str, changes: &GroupChanges) -> Result<Option<Group>> {
        let row = self
            .connection
            .query_one_raw(statement(
                self.backend(),
                &format!(
                    "UPDATE identity_groups SET name = COALESCE($2, name), \
                     description = COALESCE($3, description) WHERE id = $1 RETURNING {GROUP_COLUMNS}"
                ),
                vec![
                    id.into(),
                    changes.name.clone().into(),
                    changes.description.clone().into(),
                ],
            ))
            .await
            .map_err(|error| {
                duplicate_or(error, || {
                    format!(
                        "a group named {:?} already exists",
                        changes.name.as_deref().unwrap_or_default()
                    )
                })
            })?;
        row.as_ref().map(group_of).transpose()
    }

    /// Deletes a group, its memberships and its role assignments, and
    /// revokes its members' tokens for the projects it had roles on; false
    /// when there is no such group.
    pub async fn delete_group(
        &self,
        group: &Group,
        revocation_expiry: DateTime<Utc>,
    ) -> Result<bool> {
        let transaction = self.connection.begin().await?;
        let holders = select_in(
            &transaction,
            "SELECT DISTINCT members.user_id, roles.project_id \
             FROM identity_group_members members JOIN identity_group_role_assignments roles \
             ON roles.group_id = members.group_id WHERE members.group_id = $1",
            vec![group.id.clone().into()],
        )
        .await?;
        delete_revoking(
            transaction,
            &[
                "DELETE FROM identity_group_role_assignments WHERE group_id = $1",
                "DELETE FROM identity_group_members WHERE group_id = $1",
            ],
            &group.id,
            ("DELETE FROM identity_groups WHERE id = $1", &group.id),
            &holders,
            revocation_expiry,
        )
        .await
    }

    /// Makes a user a member of a group, if both still exist; adding it
    /// again changes nothing. False when the group or the user is gone.
    pub async fn add_group_member(&self, group_id: &str, user_id: &str) -> Result<bool> {
        let backend = self.backend();
        self.connection
            .execute_raw(statement(
                backend,
                "INSERT INTO identity_group_members (group_id, user_id) SELECT $1, $2 \
                 WHERE EXISTS (SELECT 1 FROM identity_groups WHERE id = $1) \
                 AND EXISTS (SELECT 1 FROM identity_users WHERE id = $2) \
                 ON CONFLICT (group_id, user_id) DO NOTHING",
                vec![group_id.into(), user_id.into()],
            ))
            .await?;
        let member = self
            .connection
            .query_one_raw(statement(
                backend,
                "SELECT user_id FROM identity_group_members WHERE group_id = $1 AND user_id = $2",
                vec![group_id.into(), user_id.into()],
            ))
            .await?;
        Ok(member.is_some())
    }

    /// Takes a user out of a group and revokes its tokens for the projects
    /// the group has roles on; false when it was not a member.
    pub async fn remove_group_member(
        &self,
        group_id: &str,
        user_id: &str,
        revocation_expiry: DateTime<Utc>,
    ) -> Result<bool> {
        let transaction = self.connection.begin().await?;
        let removed = transaction
            .execute_raw(statement(
                transaction.get_database_backend(),
                "DELETE FROM identity_group_members WHERE group_id = $1 AND user_id = $2",
                vec![group_id.into(), user_id.into()],
            ))
            .await?
            .rows_affected();
        if removed == 0 {
            return Ok(false);
        }
        let holders = select_in(
            &transaction,
            "SELECT DISTINCT $2 AS user_id, project_id FROM identity_group_role_assignments \
             WHERE group_id = $1",
            vec![group_id.into(), user_id.into()],
        )
        .await?;
        insert_revocations(&transaction, &holders, revocation_expiry).await?;
        transaction.commit().await?;
        Ok(true)
    }

    /// A group's members, by name.
    pub async fn group_members(&self, group_id: &str) -> Result<Vec<User>> {
        self.select(
            &format!(
                "SELECT {USER_COLUMNS} FROM identity_users WHERE id IN \
                 (SELECT user_id FROM identity_group_members WHERE group_id = $1) ORDER BY name"
            ),
            vec![group_id.into()],
            user_of,
        )
        .await
    }

    /// Gives a role, if it still exists; giving it again changes nothing.
    /// False when the role is gone.
    pub async fn add_role(&self, assignment: &Assignment) -> Result<bool> {
        let backend = self.backend();
        let (table, holder_column, holder) = assignment_table(assignment);
        self.connection
            .execute_raw(statement(
                backend,
                &format!(
                    "INSERT INTO {table} ({holder_column}, project_id, role) \
                     SELECT $1, $2, name FROM identity_roles WHERE name = $3 \
                     ON CONFLICT ({holder_column}, project_id, role) DO NOTHING"
                ),
                vec![
                    holder.into(),
                    assignment.project_id.clone().into(),
                    assignment.role.clone().into(),
                ],
            ))
            .await?;
        let held = self
            .connection
            .query_one_raw(statement(
                backend,
                &format!(
                    "SELECT role FROM {table} WHERE {holder_column} = $1 AND project_id = $2 AND role = $3"
                ),
                vec![
                    holder.into(),
                    assignment.project_id.clone().into(),
                    assignment.role.clone().into(),
                ],
            ))
            .await?;
        Ok(held.is_some())
    }

    /// Takes a role away and revokes the tokens of the user (or of the
    /// group's members) for the project; false when it was not held.
    pub async fn remove_role(
        &self,
        assignment: &Assignment,
        revocation_expiry: DateTime<Utc>,
    ) -> Result<bool> {
        let transaction = self.connection.begin().await?;
        let (table, holder_column, holder) = assignment_table(assignment);
        let removed = transaction
            .execute_raw(statement(
                transaction.get_database_backend(),
                &format!(
                    "DELETE FROM {table} WHERE {holder_column} = $1 AND project_id = $2 AND role = $3"
                ),
                vec![
                    holder.into(),
                    assignment.project_id.clone().into(),
                    assignment.role.clone().into(),
                ],
            ))
            .await?
            .rows_affected();
        if removed == 0 {
            return Ok(false);
        }
        let holders = match &assignment.assignee {
            Assignee::User(user_id) => vec![(user_id.clone(), assignment.project_id.clone())],
            Assignee::Group(group_id) => select_in(
                &transaction,
                "SELECT user_id, $2 AS project_id FROM identity_group_members WHERE group_id = $1",
                vec![
                    group_id.clone().into(),
                    assignment.project_id.clone().into(),
                ],
            )
            .await?,
        };
        insert_revocations(&transaction, &holders, revocation_expiry).await?;
        transaction.commit().await?;
        Ok(true)
    }

    /// The roles a user has on a project, its own and its groups', sorted.
    pub async fn roles_of(&self, user_id: &str, project_id: &str) -> Result<Vec<String>> {
        self.select(
            "SELECT role FROM identity_role_assignments WHERE user_id = $1 AND project_id = $2 \
             UNION SELECT roles.role FROM identity_group_role_assignments roles \
             JOIN identity_group_members members ON members.group_id = roles.group_id \
             WHERE members.user_id = $1 AND roles.project_id = $2 ORDER BY role",
            vec![user_id.into(), project_id.into()],
            |row| Ok(row.try_get("", "role")?),
        )
        .await
    }

    /// Users' own role assignments, of one user and/or one project when
    /// given.
    pub async fn list_assignments(
        &self,
        user_id: Option<&str>,
        project_id: Option<&str>,
    ) -> Result<Vec<Assignment>> {
        self.select(
            "SELECT user_id, project_id, role FROM identity_role_assignments \
             WHERE ($1 = '' OR user_id = $1) AND ($2 = '' OR project_id = $2) \
             ORDER BY user_id, project_id, role",
            vec![
                user_id.unwrap_or_default().into(),
                project_id.unwrap_or_default().into(),
            ],
            |row| {
                Ok(Assignment {
                    assignee: Assignee::User(row.try_get("", "user_id")?),
                    project_id: row.try_get("", "project_id")?,
                    role: row.try_get("", "role")?,
                })
            },
        )
        .await
    }

    /// Groups' role assignments, of one group and/or one project when
    /// given.
    pub async fn list_group_assignments(
        &self,
        group_id: Option<&str>,
        project_id: Option<&str>,
    ) -> Result<Vec<Assignment>> {
        self.select(
            "SELECT group_id, project_id, role FROM identity_group_role_assignments \
             WHERE ($1 = '' OR group_id = $1) AND ($2 = '' OR project_id = $2) \
             ORDER BY group_id, project_id, role",
            vec![
                group_id.unwrap_or_default().into(),
                project_id.unwrap_or_default().into(),
            ],
            |row| {
                Ok(Assignment {
                    assignee: Assignee::Group(row.try_get("", "group_id")?),
                    project_id: row.try_get("", "project_id")?,
                    role: row.try_get("", "role")?,
                })
            },
        )
        .await
    }

    /// Revokes one token (by its id) until it would have expired anyway.
    pub async fn revoke_token(&self, token_id: &str, expires_at: DateTime<Utc>) -> Result<()> {
        insert_revocation(&self.connection, Some(token_id), None, None, expires_at).await
    }

    /// Revocations written after `after` (an id), oldest first, leaving out
    /// those whose tokens have all expired.
    pub async fn revocations_after(&self, after: i64) -> Result<Vec<Revocation>> {
        self.select(
            "SELECT id, token_id, user_id, project_id, issued_before, expires_at \
             FROM identity_revocations WHERE id > $1 ORDER BY id",
            vec![after.into()],
            |row| {
                Ok(Revocation {
                    id: row.try_get("", "id")?,
                    token_id: row.try_get("", "token_id")?,
                    user_id: row.try_get("", "user_id")?,
                    project_id: row.try_get("", "project_id")?,
                    issued_before: row.try_get("", "issued_before")?,
                    expires_at: row.try_get("", "expires_at")?,
                })
            },
        )
        .await
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

/// The table of an assignment, the column naming its holder, and the
/// holder's id.
fn assignment_table(assignment: &Assignment) -> (&'static str, &'static str, &str) {
    match &assignment.assignee {
        Assignee::User(user_id) => ("identity_role_assignments", "user_id", user_id),
        Assignee::Group(group_id) => ("identity_group_role_assignments", "group_id", group_id),
    }
}

/// The users and projects whose `user_id, project_id` rows `sql` selects.
async fn select_in(
    connection: &impl ConnectionTrait,
    sql: &str,
    values: Vec<sea_orm::Value>,
) -> Result<Vec<UserOnProject>> {
    let rows = connection
        .query_all_raw(statement(connection.get_database_backend(), sql, values))
        .await?;
    rows.iter().map(user_on_project_of).collect()
}

/// Who holds the role named `role` where: its users, and its groups'
/// members, on each project it is given on.
async fn holders_of_role(
    connection: &impl ConnectionTrait,
    role: &str,
) -> Result<Vec<UserOnProject>> {
    select_in(
        connection,
        "SELECT user_id, project_id FROM identity_role_assignments WHERE role = $1 \
         UNION SELECT members.user_id, roles.project_id FROM identity_group_role_assignments roles \
         JOIN identity_group_members members ON members.group_id = roles.group_id \
         WHERE roles.role = $1",
        vec![role.into()],
    )
    .await
}

/// Revokes each user's tokens for its project.
/// In `transaction`: runs each of `dependents` on `key`, deletes the row
/// `(delete, id)` names, records `holders`' revocations, and commits;
/// false (nothing changed) when the row was gone.
async fn delete_revoking(
    transaction: sea_orm::DatabaseTransaction,
    dependents: &[&str],
    key: &str,
    (delete, id): (&str, &str),
    holders: &[UserOnProject],
    revocation_expiry: DateTime<Utc>,
) -> Result<bool> {
    let backend = transaction.get_database_backend();
    for sql in dependents {
        transaction
            .execute_raw(statement(backend, sql, vec![key.into()]))
            .await?;
    }
    let deleted = transaction
        .execute_raw(statement(backend, delete, vec![id.into()]))
        .await?
        .rows_affected();
    if deleted == 0 {
        return Ok(false);
    }
    insert_revocations(&transaction, holders, revocation_expiry).await?;
    transaction.commit().await?;
    Ok(true)
}

async fn insert_revocations(
    connection: &impl ConnectionTrait,
    holders: &[UserOnProject],
    expires_at: DateTime<Utc>,
) -> Result<()> {
    for (user_id, project_id) in holders {
        insert_revocation(
            connection,
            None,
            Some(user_id),
            Some(project_id),
            expires_at,
        )
        .await?;
    }
    Ok(())
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
