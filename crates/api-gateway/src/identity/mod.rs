//! The gateway's built-in identity: projects, users (argon2 password
//! hashes), roles, groups, role assignments and revocations, in the
//! gateway's own store — what the Keystone v3 front door at `/identity`
//! authenticates against and `ember.identity.v1.IdentityAdminService`
//! manages.
//!
//! Ember has one domain, Keystone's `Default` (id `default`). A token the
//! front door issues is an Ember token like any other (the same signed JWT,
//! with the user's and project's names and the methods added); revoking it,
//! or taking away what it stood for (a role, a group membership, a user, a
//! project, a password, an enabled flag), refuses it on every gateway
//! replica: each one reads new revocations from the shared store every
//! [`REVOCATION_POLL`]. Wrong passwords are counted in the store too, so
//! Keystone's account lockout ([`Lockout`]) holds on every replica;
//! `throttle` bounds how fast one address may ask.
//!
//! Roles are objects, as in Keystone: `admin`, `member` and `reader` always
//! exist (their ids are their names) and cannot be renamed or deleted;
//! others are created first and then given. A role given to a group on a
//! project is held there by each of the group's members.

pub mod admin;
pub mod keystone;
pub mod migrations;
pub mod password;
mod revocations;
pub mod store;
pub mod throttle;

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use ember_runtime::auth::TokenDetails;
use ember_runtime::identity::{ADMIN_ROLE, MEMBER_ROLE, READER_ROLE};
use ember_runtime::{ErrorKind, Identity};
use tokio_util::sync::CancellationToken;

pub use revocations::Revocations;
pub use store::IdentityStore;

/// Keystone's default domain, the only one Ember has.
pub const DOMAIN_ID: &str = "default";
pub const DOMAIN_NAME: &str = "Default";

/// How often a replica reads revocations other replicas wrote.
pub const REVOCATION_POLL: Duration = Duration::from_millis(250);

/// How long a revocation of a user's or project's tokens is kept: longer
/// than any token lives (`ember token issue` refuses longer lifetimes).
pub const MAX_TOKEN_LIFETIME: Duration = Duration::from_secs(366 * 24 * 3600);

/// The roles that always exist; their ids are their names.
pub const BUILT_IN_ROLES: [&str; 3] = [ADMIN_ROLE, MEMBER_ROLE, READER_ROLE];

/// The most bytes a description may have.
const MAX_DESCRIPTION_BYTES: usize = 1024;
/// The most bytes an email may have.
const MAX_EMAIL_BYTES: usize = 255;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Project {
    pub id: String,
    pub name: String,
    pub description: String,
    pub created_at: DateTime<Utc>,
    /// A disabled project's tokens are revoked and its scoped logins
    /// refused.
    pub enabled: bool,
}

/// What an update of a project changes: `None` keeps the field.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProjectChanges {
    pub name: Option<String>,
    pub description: Option<String>,
    pub enabled: Option<bool>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct User {
    pub id: String,
    pub name: String,
    /// A PHC string ([`password::hash`]); never the password.
    pub password_hash: String,
    pub default_project_id: Option<String>,
    pub created_at: DateTime<Utc>,
    /// Wrong passwords in a row (Keystone's `failed_auth_count`).
    pub failed_auth_count: i32,
    /// When the last wrong password was given.
    pub failed_auth_at: Option<DateTime<Utc>>,
    pub description: Option<String>,
    pub email: Option<String>,
    /// A disabled user cannot log in; its tokens are revoked.
    pub enabled: bool,
}

/// A user to create.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NewUser<'a> {
    pub name: &'a str,
    pub password: &'a str,
    /// Empty = a generated id.
    pub id: &'a str,
    /// A project's name or id; empty = none.
    pub default_project: &'a str,
    /// Empty = none.
    pub description: &'a str,
    /// Empty = none.
    pub email: &'a str,
    pub enabled: bool,
}

/// What an update of a user changes: `None` keeps the field; `Some(None)`
/// clears a field that may be empty.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct UserChanges {
    pub name: Option<String>,
    pub description: Option<Option<String>>,
    pub email: Option<Option<String>>,
    pub enabled: Option<bool>,
    /// A project's id (the directory resolves names).
    pub default_project_id: Option<Option<String>>,
}

/// A user update as asked for: the default project by name or id, empty
/// for none; an empty description or email clears it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct UserUpdate {
    pub name: Option<String>,
    pub description: Option<String>,
    pub email: Option<String>,
    pub enabled: Option<bool>,
    pub default_project: Option<String>,
}

/// A role, Keystone's role object. Assignments name it by its name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Role {
    pub id: String,
    pub name: String,
}

impl Role {
    /// One of [`BUILT_IN_ROLES`]: never renamed nor deleted.
    pub fn is_built_in(&self) -> bool {
        BUILT_IN_ROLES.contains(&self.id.as_str())
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Group {
    pub id: String,
    pub name: String,
    pub description: String,
    pub created_at: DateTime<Utc>,
}

/// What an update of a group changes: `None` keeps the field.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GroupChanges {
    pub name: Option<String>,
    pub description: Option<String>,
}

/// Keystone's account lockout (`[security_compliance]
/// lockout_failure_attempts` and `lockout_duration`): after `attempts`
/// wrong passwords in a row a user's password logins are refused — the
/// right password too, with the same 401 as any failure — for
/// `duration`, or until an admin unlocks the user when it is `None`.
/// Tokens the user already has keep working until they expire.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Lockout {
    /// 0 = never locked.
    pub attempts: u32,
    pub duration: Option<Duration>,
}

impl Default for Lockout {
    /// Ten wrong passwords lock a user for half an hour (Keystone's
    /// `lockout_duration` default; Keystone leaves lockout off).
    fn default() -> Self {
        Lockout {
            attempts: 10,
            duration: Some(Duration::from_secs(1800)),
        }
    }
}

impl Lockout {
    /// Whether `user` is locked out at `now`.
    pub fn locks(&self, user: &User, now: DateTime<Utc>) -> bool {
        if self.attempts == 0 || u32::try_from(user.failed_auth_count).unwrap_or(0) < self.attempts
        {
            return false;
        }
        match (self.duration, user.failed_auth_at) {
            (None, _) => true,
            (Some(_), Some(last)) => self.lifted_at(last).is_none_or(|lifted| lifted > now),
            (Some(_), None) => false,
        }
    }

    /// When a lockout that began at `since` ends by itself; `None` when it
    /// does not (it lasts until an admin lifts it, or beyond any date).
    pub fn lifted_at(&self, since: DateTime<Utc>) -> Option<DateTime<Utc>> {
        let duration = chrono::Duration::from_std(self.duration?).ok()?;
        since.checked_add_signed(duration)
    }
}

/// Who holds a role assignment, by id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Assignee {
    User(String),
    Group(String),
}

/// A role given to a user or a group on a project; the role by its name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Assignment {
    pub assignee: Assignee,
    pub project_id: String,
    pub role: String,
}

/// A user or a group, as a request names it (by name or id).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AssigneeName<'a> {
    User(&'a str),
    Group(&'a str),
}

/// One token (by id), or every token of a user and/or a project issued at
/// or before `issued_before` (milliseconds since the epoch).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Revocation {
    pub id: i64,
    pub token_id: Option<String>,
    pub user_id: Option<String>,
    pub project_id: Option<String>,
    pub issued_before: i64,
    pub expires_at: DateTime<Utc>,
}

impl Revocation {
    /// Whether this revocation refuses the token `details` describes.
    pub fn revokes(&self, details: &TokenDetails) -> bool {
        if let Some(token_id) = &self.token_id {
            return !details.token_id.is_empty() && *token_id == details.token_id;
        }
        if self.user_id.is_none() && self.project_id.is_none() {
            return false;
        }
        details.issued_at_ms <= self.issued_before
            && self
                .user_id
                .as_ref()
                .is_none_or(|user| *user == details.identity.user_id)
            && self
                .project_id
                .as_ref()
                .is_none_or(|project| *project == details.identity.project_id)
    }
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum IdentityError {
    #[error("{0} not found")]
    NotFound(String),
    /// A name or id another object already has.
    #[error("{0}")]
    AlreadyExists(String),
    /// The object's state forbids this (a built-in role).
    #[error("{0}")]
    Conflict(String),
    #[error("{0}")]
    Invalid(String),
    /// The caller may not do this.
    #[error("{0}")]
    Forbidden(String),
    #[error("identity store: {0}")]
    Database(String),
}

impl IdentityError {
    pub fn kind(&self) -> ErrorKind {
        match self {
            IdentityError::NotFound(_) => ErrorKind::NotFound,
            IdentityError::AlreadyExists(_) | IdentityError::Conflict(_) => ErrorKind::Conflict,
            IdentityError::Invalid(_) => ErrorKind::InvalidInput,
            IdentityError::Forbidden(_) => ErrorKind::Forbidden,
            IdentityError::Database(_) => ErrorKind::Unavailable,
        }
    }

    pub fn into_status(self) -> tonic::Status {
        // gRPC has a code of its own for a duplicate; HTTP says 409 for
        // both kinds of conflict.
        let code = match &self {
            IdentityError::AlreadyExists(_) => tonic::Code::AlreadyExists,
            IdentityError::NotFound(_)
            | IdentityError::Conflict(_)
            | IdentityError::Invalid(_)
            | IdentityError::Forbidden(_)
            | IdentityError::Database(_) => self.kind().grpc_code(),
        };
        tonic::Status::new(code, self.to_string())
    }
}

type Result<T> = std::result::Result<T, IdentityError>;

/// Checks a user, project, role or group name (or a given id): 1 to 64 letters,
/// digits and `._@-` — what travels in identity headers unchanged.
pub fn check_name(what: &str, name: &str) -> Result<()> {
    Identity::new(name, "p", vec![]).validate().map_err(|_| {
        IdentityError::Invalid(format!(
            "{what} {:?} must be 1 to 64 letters, digits and ._@-",
            ember_runtime::quote::quoted(name)
        ))
    })
}

/// A Keystone-style id: 32 hex digits.
pub fn new_id() -> String {
    uuid::Uuid::new_v4().simple().to_string()
}

/// Why a password or token authentication failed. The front door answers
/// every one with the same 401: a caller learns nothing about which part
/// was wrong; the log says.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum LoginFailure {
    #[error("no such user {0:?}")]
    UnknownUser(String),
    #[error("wrong password for user {0:?}")]
    WrongPassword(String),
    #[error("user {0:?} is locked out after too many wrong passwords")]
    Locked(String),
    #[error("user {0:?} is disabled")]
    UserDisabled(String),
    #[error("project {0:?} is disabled")]
    ProjectDisabled(String),
    #[error("no such project {0:?}")]
    UnknownProject(String),
    #[error("user {user:?} has no role on project {project:?}")]
    NoRole { user: String, project: String },
    #[error("unknown domain {0:?}: Ember has only the Default domain")]
    UnknownDomain(String),
    #[error("{0}")]
    Store(IdentityError),
}

/// A user or project named in an authentication request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reference {
    Id(String),
    /// By name, in a domain (named or by id); `None` = `Default`.
    Name {
        name: String,
        domain: Option<Domain>,
    },
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Domain {
    Id(String),
    Name(String),
}

impl Domain {
    fn check(&self) -> std::result::Result<(), LoginFailure> {
        match self {
            Domain::Id(id) if id == DOMAIN_ID => Ok(()),
            Domain::Name(name) if name == DOMAIN_NAME => Ok(()),
            Domain::Id(other) | Domain::Name(other) => {
                Err(LoginFailure::UnknownDomain(other.clone()))
            }
        }
    }
}

/// Who a successful authentication is, and where it is scoped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Login {
    pub user: User,
    pub project: Project,
    pub roles: Vec<String>,
}

/// The built-in identity: the store, and the revocations every replica
/// applies.
#[derive(Clone, Debug)]
pub struct Directory {
    store: IdentityStore,
    revocations: Arc<Revocations>,
    lockout: Lockout,
}

impl Directory {
    /// Opens the store and starts following revocations until `shutdown`.
    pub async fn open(
        database_url: &str,
        shutdown: CancellationToken,
    ) -> std::result::Result<Directory, String> {
        let store = IdentityStore::open(database_url, &shutdown).await?;
        let revocations = Arc::new(Revocations::default());
        revocations
            .refresh(&store)
            .await
            .map_err(|error| error.to_string())?;
        tokio::spawn(revocations::follow(
            Arc::clone(&revocations),
            store.clone(),
            shutdown,
        ));
        Ok(Directory {
            store,
            revocations,
            lockout: Lockout::default(),
        })
    }

    /// The same directory, locking users out by `lockout`.
    pub fn with_lockout(self, lockout: Lockout) -> Directory {
        Directory { lockout, ..self }
    }

    pub fn lockout(&self) -> Lockout {
        self.lockout
    }

    pub fn store(&self) -> &IdentityStore {
        &self.store
    }

    /// Whether a verified token was revoked (on any replica, as of the
    /// last poll; on this one, at once).
    pub fn is_revoked(&self, details: &TokenDetails) -> bool {
        self.revocations.revokes(details)
    }

    /// Revokes one token until it would have expired anyway.
    pub async fn revoke(&self, details: &TokenDetails) -> Result<()> {
        if details.token_id.is_empty() {
            return Err(IdentityError::Invalid(
                "this token has no id and cannot be revoked on its own (it was minted before Ember 0.2): delete or change its user instead".to_owned(),
            ));
        }
        let expires_at = DateTime::from_timestamp(details.expires_at, 0).unwrap_or_else(Utc::now);
        self.store
            .revoke_token(&details.token_id, expires_at)
            .await?;
        self.revocations.refresh(&self.store).await
    }

    /// Applies the store's newest revocations now (after this replica
    /// wrote one).
    pub async fn refresh(&self) -> Result<()> {
        self.revocations.refresh(&self.store).await
    }

    async fn user(&self, reference: &Reference) -> std::result::Result<Option<User>, LoginFailure> {
        match reference {
            Reference::Id(id) => self.store.user_by_id(id).await,
            Reference::Name { name, domain } => {
                if let Some(domain) = domain {
                    domain.check()?;
                }
                self.store.user_by_name(name).await
            }
        }
        .map_err(LoginFailure::Store)
    }

    async fn project(&self, reference: &Reference) -> std::result::Result<Project, LoginFailure> {
        let found = match reference {
            Reference::Id(id) => self.store.project_by_id(id).await,
            Reference::Name { name, domain } => {
                if let Some(domain) = domain {
                    domain.check()?;
                }
                self.store.project_by_name(name).await
            }
        }
        .map_err(LoginFailure::Store)?;
        found.ok_or_else(|| {
            LoginFailure::UnknownProject(match reference {
                Reference::Id(id) | Reference::Name { name: id, .. } => id.clone(),
            })
        })
    }

    /// The `password` method: the user, its password, and the project the
    /// token is for (`None` = the user's default project).
    pub async fn password_login(
        &self,
        user: &Reference,
        password: &str,
        project: Option<&Reference>,
    ) -> std::result::Result<Login, LoginFailure> {
        let found = self.user(user).await?;
        let password = password.to_owned();
        let Some(found) = found else {
            // As long as a real verification, so timing tells nothing.
            let _ = tokio::task::spawn_blocking(move || password::verify_nothing(&password)).await;
            return Err(LoginFailure::UnknownUser(match user {
                Reference::Id(id) | Reference::Name { name: id, .. } => id.clone(),
            }));
        };
        // Keystone's order: a locked user's password is not even checked.
        let now = ember_runtime::time::now();
        if self.lockout.locks(&found, now) {
            return Err(LoginFailure::Locked(found.name));
        }
        let stored = found.password_hash.clone();
        let matches = tokio::task::spawn_blocking(move || password::verify(&password, &stored))
            .await
            .unwrap_or(false);
        if !matches {
            let count = self
                .store
                .record_failed_auth(&found.id, now)
                .await
                .map_err(LoginFailure::Store)?;
            if self.lockout.attempts > 0
                && u32::try_from(count).unwrap_or(0) == self.lockout.attempts
            {
                // Audited once, as it happens.
                tracing::warn!(
                    user_id = %found.id,
                    user = %found.name,
                    attempts = count,
                    until = ?self.lockout.lifted_at(now),
                    "user locked out after too many wrong passwords"
                );
            }
            return Err(LoginFailure::WrongPassword(found.name));
        }
        if found.failed_auth_count > 0 {
            self.store
                .reset_failed_auth(&found.id)
                .await
                .map_err(LoginFailure::Store)?;
        }
        // Keystone's order: the password first, then whether the user
        // may log in at all; both answer the same 401.
        if !found.enabled {
            return Err(LoginFailure::UserDisabled(found.name));
        }
        self.scope(found, project).await
    }

    /// The `token` method: a new token for the same user, scoped anew.
    pub async fn token_login(
        &self,
        details: &TokenDetails,
        project: Option<&Reference>,
    ) -> std::result::Result<Login, LoginFailure> {
        let user = self
            .store
            .user_by_id(&details.identity.user_id)
            .await
            .map_err(LoginFailure::Store)?
            .ok_or_else(|| LoginFailure::UnknownUser(details.identity.user_id.clone()))?;
        if !user.enabled {
            return Err(LoginFailure::UserDisabled(user.name));
        }
        let project = project
            .cloned()
            .unwrap_or_else(|| Reference::Id(details.identity.project_id.clone()));
        self.scope(user, Some(&project)).await
    }

    async fn scope(
        &self,
        user: User,
        project: Option<&Reference>,
    ) -> std::result::Result<Login, LoginFailure> {
        let reference = match project {
            Some(reference) => reference.clone(),
            None => match &user.default_project_id {
                Some(id) => Reference::Id(id.clone()),
                None => {
                    return Err(LoginFailure::UnknownProject(
                        "(none named, and the user has no default project)".to_owned(),
                    ));
                }
            },
        };
        let project = self.project(&reference).await?;
        if !project.enabled {
            return Err(LoginFailure::ProjectDisabled(project.name));
        }
        let roles = self
            .store
            .roles_of(&user.id, &project.id)
            .await
            .map_err(LoginFailure::Store)?;
        if roles.is_empty() {
            return Err(LoginFailure::NoRole {
                user: user.name,
                project: project.name,
            });
        }
        Ok(Login {
            user,
            project,
            roles,
        })
    }

    /// What a token issued for `login` says.
    pub fn token_details(login: &Login, methods: Vec<String>, ttl: Duration) -> TokenDetails {
        let mut details = TokenDetails::new(
            Identity::new(&login.user.id, &login.project.id, login.roles.clone()),
            ttl,
        );
        details.user_name = Some(login.user.name.clone());
        details.project_name = Some(login.project.name.clone());
        details.methods = methods;
        details
    }

    /// Creates an enabled project (`ember dev` seeds its own this way).
    pub async fn create_project(&self, name: &str, description: &str, id: &str) -> Result<Project> {
        self.create_project_with(name, description, id, true).await
    }

    pub async fn create_project_with(
        &self,
        name: &str,
        description: &str,
        id: &str,
        enabled: bool,
    ) -> Result<Project> {
        check_name("project name", name)?;
        let id = given_or_new_id("project id", id)?;
        check_description("project", description)?;
        let project = Project {
            id,
            name: name.to_owned(),
            description: description.to_owned(),
            created_at: ember_runtime::time::now(),
            enabled,
        };
        self.store.create_project(&project).await?;
        Ok(project)
    }

    pub async fn find_project(&self, name_or_id: &str) -> Result<Project> {
        self.store
            .find_project(name_or_id)
            .await?
            .ok_or_else(|| IdentityError::NotFound(format!("project {name_or_id:?}")))
    }

    /// Renames, describes, enables or disables a project; disabling it
    /// revokes its tokens.
    pub async fn update_project(
        &self,
        name_or_id: &str,
        changes: ProjectChanges,
    ) -> Result<Project> {
        let project = self.find_project(name_or_id).await?;
        if let Some(name) = &changes.name {
            check_name("project name", name)?;
        }
        if let Some(description) = &changes.description {
            check_description("project", description)?;
        }
        let updated = self
            .store
            .update_project(&project.id, &changes, revocation_expiry())
            .await?
            .ok_or_else(|| IdentityError::NotFound(format!("project {name_or_id:?}")))?;
        if changes.enabled == Some(false) {
            tracing::warn!(project_id = %updated.id, project = %updated.name, "project disabled: its tokens are revoked");
            self.refresh().await?;
        }
        Ok(updated)
    }

    pub async fn delete_project(&self, name_or_id: &str) -> Result<()> {
        let project = self.find_project(name_or_id).await?;
        self.store
            .delete_project(&project, revocation_expiry())
            .await?;
        self.refresh().await
    }

    /// Creates an enabled user with no description or email (`ember dev`
    /// seeds its own this way).
    pub async fn create_user(
        &self,
        name: &str,
        password: &str,
        id: &str,
        default_project: &str,
    ) -> Result<User> {
        self.create_user_with(NewUser {
            name,
            password,
            id,
            default_project,
            enabled: true,
            ..NewUser::default()
        })
        .await
    }

    pub async fn create_user_with(&self, new: NewUser<'_>) -> Result<User> {
        check_name("user name", new.name)?;
        let id = given_or_new_id("user id", new.id)?;
        password::check_new(new.password).map_err(IdentityError::Invalid)?;
        check_description("user", new.description)?;
        check_email(new.email)?;
        let default_project_id = if new.default_project.is_empty() {
            None
        } else {
            Some(self.find_project(new.default_project).await?.id)
        };
        let password = new.password.to_owned();
        let password_hash = tokio::task::spawn_blocking(move || password::hash(&password))
            .await
            .map_err(|error| IdentityError::Database(error.to_string()))?
            .map_err(IdentityError::Database)?;
        let user = User {
            id,
            name: new.name.to_owned(),
            password_hash,
            default_project_id,
            created_at: ember_runtime::time::now(),
            failed_auth_count: 0,
            failed_auth_at: None,
            description: non_empty(new.description),
            email: non_empty(new.email),
            enabled: new.enabled,
        };
        self.store.create_user(&user).await?;
        Ok(user)
    }

    pub async fn find_user(&self, name_or_id: &str) -> Result<User> {
        self.store
            .find_user(name_or_id)
            .await?
            .ok_or_else(|| IdentityError::NotFound(format!("user {name_or_id:?}")))
    }

    /// Renames, describes, enables or disables a user, or changes its
    /// email or default project; disabling it revokes its tokens.
    pub async fn update_user(&self, name_or_id: &str, update: UserUpdate) -> Result<User> {
        let user = self.find_user(name_or_id).await?;
        if let Some(name) = &update.name {
            check_name("user name", name)?;
        }
        if let Some(description) = &update.description {
            check_description("user", description)?;
        }
        if let Some(email) = &update.email {
            check_email(email)?;
        }
        let default_project_id = match update.default_project.as_deref() {
            None => None,
            Some("") => Some(None),
            Some(project) => Some(Some(self.find_project(project).await?.id)),
        };
        let changes = UserChanges {
            name: update.name,
            description: update.description.as_deref().map(non_empty),
            email: update.email.as_deref().map(non_empty),
            enabled: update.enabled,
            default_project_id,
        };
        let updated = self
            .store
            .update_user(&user.id, &changes, revocation_expiry())
            .await?
            .ok_or_else(|| IdentityError::NotFound(format!("user {name_or_id:?}")))?;
        if changes.enabled == Some(false) {
            tracing::warn!(user_id = %updated.id, user = %updated.name, "user disabled: its tokens are revoked");
            self.refresh().await?;
        }
        Ok(updated)
    }

    pub async fn delete_user(&self, name_or_id: &str) -> Result<()> {
        let user = self.find_user(name_or_id).await?;
        self.store.delete_user(&user, revocation_expiry()).await?;
        self.refresh().await
    }

    /// Lifts a user's lockout (forgets its wrong passwords), as an admin
    /// re-enabling a Keystone user does.
    pub async fn unlock_user(&self, name_or_id: &str) -> Result<User> {
        let user = self.find_user(name_or_id).await?;
        if !self.store.reset_failed_auth(&user.id).await? {
            return Err(IdentityError::NotFound(format!("user {name_or_id:?}")));
        }
        tracing::warn!(user_id = %user.id, user = %user.name, "user unlocked by an admin");
        Ok(User {
            failed_auth_count: 0,
            failed_auth_at: None,
            ..user
        })
    }

    pub async fn set_password(&self, name_or_id: &str, password: &str) -> Result<User> {
        let user = self.find_user(name_or_id).await?;
        password::check_new(password).map_err(IdentityError::Invalid)?;
        let password = password.to_owned();
        let hash = tokio::task::spawn_blocking(move || password::hash(&password))
            .await
            .map_err(|error| IdentityError::Database(error.to_string()))?
            .map_err(IdentityError::Database)?;
        self.store
            .set_password(&user, &hash, revocation_expiry())
            .await?;
        self.refresh().await?;
        Ok(User {
            password_hash: hash,
            failed_auth_count: 0,
            failed_auth_at: None,
            ..user
        })
    }

    pub async fn create_role(&self, name: &str, id: &str) -> Result<Role> {
        check_name("role name", name)?;
        let role = Role {
            id: given_or_new_id("role id", id)?,
            name: name.to_owned(),
        };
        self.store.create_role(&role).await?;
        Ok(role)
    }

    pub async fn find_role(&self, name_or_id: &str) -> Result<Role> {
        self.store
            .find_role(name_or_id)
            .await?
            .ok_or_else(|| IdentityError::NotFound(format!("role {name_or_id:?}")))
    }

    /// Renames a role; its assignments follow it, and the tokens holding
    /// it (which carry its old name) are revoked.
    pub async fn rename_role(&self, name_or_id: &str, name: &str) -> Result<Role> {
        let role = self.find_role(name_or_id).await?;
        check_name("role name", name)?;
        if role.is_built_in() {
            return Err(IdentityError::Conflict(format!(
                "role {:?} is built in: it cannot be renamed",
                role.name
            )));
        }
        if role.name == name {
            return Ok(role);
        }
        let renamed = self
            .store
            .rename_role(&role, name, revocation_expiry())
            .await?
            .ok_or_else(|| IdentityError::NotFound(format!("role {name_or_id:?}")))?;
        self.refresh().await?;
        Ok(renamed)
    }

    /// Deletes a role and every assignment of it; the tokens of those who
    /// held it are revoked.
    pub async fn delete_role(&self, name_or_id: &str) -> Result<()> {
        let role = self.find_role(name_or_id).await?;
        if role.is_built_in() {
            return Err(IdentityError::Conflict(format!(
                "role {:?} is built in: it cannot be deleted",
                role.name
            )));
        }
        if !self.store.delete_role(&role, revocation_expiry()).await? {
            return Err(IdentityError::NotFound(format!("role {name_or_id:?}")));
        }
        self.refresh().await
    }

    pub async fn create_group(&self, name: &str, description: &str, id: &str) -> Result<Group> {
        check_name("group name", name)?;
        let id = given_or_new_id("group id", id)?;
        check_description("group", description)?;
        let group = Group {
            id,
            name: name.to_owned(),
            description: description.to_owned(),
            created_at: ember_runtime::time::now(),
        };
        self.store.create_group(&group).await?;
        Ok(group)
    }

    pub async fn find_group(&self, name_or_id: &str) -> Result<Group> {
        self.store
            .find_group(name_or_id)
            .await?
            .ok_or_else(|| IdentityError::NotFound(format!("group {name_or_id:?}")))
    }

    pub async fn update_group(&self, name_or_id: &str, changes: GroupChanges) -> Result<Group> {
        let group = self.find_group(name_or_id).await?;
        if let Some(name) = &changes.name {
            check_name("group name", name)?;
        }
        if let Some(description) = &changes.description {
            check_description("group", description)?;
        }
        self.store
            .update_group(&group.id, &changes)
            .await?
            .ok_or_else(|| IdentityError::NotFound(format!("group {name_or_id:?}")))
    }

    /// Deletes a group, its memberships and its role assignments; its
    /// members' tokens for the projects it had roles on are revoked.
    pub async fn delete_group(&self, name_or_id: &str) -> Result<()> {
        let group = self.find_group(name_or_id).await?;
        if !self.store.delete_group(&group, revocation_expiry()).await? {
            return Err(IdentityError::NotFound(format!("group {name_or_id:?}")));
        }
        self.refresh().await
    }

    /// Adds a user to a group (again: nothing changes); returns both.
    pub async fn add_group_member(&self, group: &str, user: &str) -> Result<(Group, User)> {
        let found_group = self.find_group(group).await?;
        let found_user = self.find_user(user).await?;
        if !self
            .store
            .add_group_member(&found_group.id, &found_user.id)
            .await?
        {
            // Deleted meanwhile: say which.
            self.find_group(group).await?;
            self.find_user(user).await?;
        }
        Ok((found_group, found_user))
    }

    /// Takes a user out of a group; its tokens for the projects where the
    /// group holds roles are revoked.
    pub async fn remove_group_member(&self, group: &str, user: &str) -> Result<()> {
        let found_group = self.find_group(group).await?;
        let found_user = self.find_user(user).await?;
        if !self
            .store
            .remove_group_member(&found_group.id, &found_user.id, revocation_expiry())
            .await?
        {
            return Err(IdentityError::NotFound(format!(
                "user {user:?} in group {group:?}"
            )));
        }
        self.refresh().await
    }

    pub async fn group_members(&self, group: &str) -> Result<Vec<User>> {
        let group = self.find_group(group).await?;
        self.store.group_members(&group.id).await
    }

    /// Resolves names to ids and the role to its name.
    async fn assignment(
        &self,
        assignee: AssigneeName<'_>,
        project: &str,
        role: &str,
    ) -> Result<Assignment> {
        check_name("role", role)?;
        let assignee = match assignee {
            AssigneeName::User(user) => Assignee::User(self.find_user(user).await?.id),
            AssigneeName::Group(group) => Assignee::Group(self.find_group(group).await?.id),
        };
        Ok(Assignment {
            assignee,
            project_id: self.find_project(project).await?.id,
            role: self.find_role(role).await?.name,
        })
    }

    /// Gives a user a role on a project (`ember dev` gives its users theirs
    /// this way).
    pub async fn add_role(&self, user: &str, project: &str, role: &str) -> Result<Assignment> {
        self.give_role(AssigneeName::User(user), project, role)
            .await
    }

    /// Gives a user or a group a role on a project; giving it again
    /// changes nothing. The role must exist.
    pub async fn give_role(
        &self,
        assignee: AssigneeName<'_>,
        project: &str,
        role: &str,
    ) -> Result<Assignment> {
        let assignment = self.assignment(assignee, project, role).await?;
        if !self.store.add_role(&assignment).await? {
            return Err(IdentityError::NotFound(format!("role {role:?}")));
        }
        Ok(assignment)
    }

    /// Takes a role away; the tokens of the user, or of the group's
    /// members, for the project are revoked.
    pub async fn remove_role(
        &self,
        assignee: AssigneeName<'_>,
        project: &str,
        role: &str,
    ) -> Result<()> {
        let assignment = self.assignment(assignee, project, role).await?;
        if !self
            .store
            .remove_role(&assignment, revocation_expiry())
            .await?
        {
            let holder = match assignee {
                AssigneeName::User(user) => format!("user {user:?}"),
                AssigneeName::Group(group) => format!("group {group:?}"),
            };
            return Err(IdentityError::NotFound(format!(
                "role {role:?} of {holder} on project {project:?}"
            )));
        }
        self.refresh().await
    }

    /// Role assignments, of one user, one group and/or one project when
    /// named (empty = any). A user's own only: those through its groups
    /// are the groups'.
    pub async fn list_assignments(
        &self,
        user: &str,
        group: &str,
        project: &str,
    ) -> Result<Vec<Assignment>> {
        if !user.is_empty() && !group.is_empty() {
            return Err(IdentityError::Invalid(
                "name a user or a group, not both".to_owned(),
            ));
        }
        let project_id = if project.is_empty() {
            None
        } else {
            Some(self.find_project(project).await?.id)
        };
        let mut assignments = Vec::new();
        if group.is_empty() {
            let user_id = if user.is_empty() {
                None
            } else {
                Some(self.find_user(user).await?.id)
            };
            assignments.extend(
                self.store
                    .list_assignments(user_id.as_deref(), project_id.as_deref())
                    .await?,
            );
        }
        if user.is_empty() {
            let group_id = if group.is_empty() {
                None
            } else {
                Some(self.find_group(group).await?.id)
            };
            assignments.extend(
                self.store
                    .list_group_assignments(group_id.as_deref(), project_id.as_deref())
                    .await?,
            );
        }
        Ok(assignments)
    }

    /// Whether the user `user_id` may manage identities acting in
    /// `project_id` now (another Ember service acting for it): both exist
    /// and are enabled, and the user holds `admin` there, its own or
    /// through a group. The roles its caller claims do not count.
    pub async fn check_identity_admin(&self, user_id: &str, project_id: &str) -> Result<()> {
        let refused = |why: String| {
            Err(IdentityError::Forbidden(format!(
                "managing identities needs the admin role: {why}"
            )))
        };
        let Some(user) = self.store.user_by_id(user_id).await? else {
            return refused(format!("there is no user with id {user_id:?}"));
        };
        let Some(project) = self.store.project_by_id(project_id).await? else {
            return refused(format!("there is no project with id {project_id:?}"));
        };
        if !user.enabled {
            return refused(format!("user {:?} is disabled", user.name));
        }
        if !project.enabled {
            return refused(format!("project {:?} is disabled", project.name));
        }
        let roles = self.store.roles_of(&user.id, &project.id).await?;
        if !roles.iter().any(|role| role == ADMIN_ROLE) {
            return refused(format!(
                "user {:?} holds none in project {:?} (its roles there: {})",
                user.name,
                project.name,
                if roles.is_empty() {
                    "none".to_owned()
                } else {
                    roles.join(", ")
                }
            ));
        }
        Ok(())
    }
}

/// A given id, checked, or a new one.
fn given_or_new_id(what: &str, id: &str) -> Result<String> {
    if id.is_empty() {
        return Ok(new_id());
    }
    check_name(what, id)?;
    Ok(id.to_owned())
}

fn check_description(of: &str, description: &str) -> Result<()> {
    if description.len() > MAX_DESCRIPTION_BYTES {
        return Err(IdentityError::Invalid(format!(
            "the {of}'s description must have at most {MAX_DESCRIPTION_BYTES} bytes"
        )));
    }
    Ok(())
}

fn check_email(email: &str) -> Result<()> {
    if email.len() > MAX_EMAIL_BYTES || email.chars().any(char::is_control) {
        return Err(IdentityError::Invalid(format!(
            "the user's email must have at most {MAX_EMAIL_BYTES} bytes and no control characters"
        )));
    }
    Ok(())
}

/// Empty text as none.
fn non_empty(text: &str) -> Option<String> {
    (!text.is_empty()).then(|| text.to_owned())
}

fn revocation_expiry() -> DateTime<Utc> {
    Utc::now()
        + chrono::Duration::from_std(MAX_TOKEN_LIFETIME).unwrap_or(chrono::Duration::days(366))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lockout_ends_when_its_duration_passes_and_one_beyond_any_date_never_does() {
        let now = Utc::now();
        let user = User {
            id: "u".into(),
            name: "u".into(),
            password_hash: String::new(),
            default_project_id: None,
            created_at: now,
            failed_auth_count: 3,
            failed_auth_at: Some(now),
            description: None,
            email: None,
            enabled: true,
        };
        let lockout = |duration| Lockout {
            attempts: 3,
            duration,
        };
        let hour = lockout(Some(Duration::from_secs(3600)));
        assert!(hour.locks(&user, now));
        assert!(!hour.locks(&user, now + chrono::Duration::hours(2)));
        assert_eq!(hour.lifted_at(now), Some(now + chrono::Duration::hours(1)));
        let endless = lockout(Some(Duration::from_secs(u64::MAX)));
        assert!(endless.locks(&user, now + chrono::Duration::days(36_500)));
        assert_eq!(endless.lifted_at(now), None);
        assert!(lockout(None).locks(&user, now));
        assert!(!lockout(None).locks(
            &User {
                failed_auth_count: 2,
                ..user
            },
            now
        ));
    }

    #[test]
    fn each_error_keeps_its_grpc_code_and_a_duplicate_is_already_exists() {
        let cases = [
            (
                IdentityError::NotFound("role \"ghost\"".into()),
                tonic::Code::NotFound,
                "role \"ghost\" not found",
            ),
            (
                IdentityError::AlreadyExists("a group named \"ops\" already exists".into()),
                tonic::Code::AlreadyExists,
                "a group named \"ops\" already exists",
            ),
            (
                IdentityError::Conflict("role \"admin\" is built in".into()),
                tonic::Code::FailedPrecondition,
                "role \"admin\" is built in",
            ),
            (
                IdentityError::Invalid("name a user or a group, not both".into()),
                tonic::Code::InvalidArgument,
                "name a user or a group, not both",
            ),
            (
                IdentityError::Forbidden("managing identities needs the admin role".into()),
                tonic::Code::PermissionDenied,
                "managing identities needs the admin role",
            ),
            (
                IdentityError::Database("connection refused".into()),
                tonic::Code::Unavailable,
                "identity store: connection refused",
            ),
        ];
        for (error, code, message) in cases {
            let status = error.into_status();
            assert_eq!(status.code(), code, "{status:?}");
            assert_eq!(status.message(), message);
        }
        assert_eq!(
            IdentityError::AlreadyExists(String::new()).kind(),
            ErrorKind::Conflict,
            "409 over HTTP"
        );
    }

    #[test]
    fn only_the_three_default_roles_are_built_in_and_ids_are_checked() {
        for id in BUILT_IN_ROLES {
            assert!(
                Role {
                    id: id.to_owned(),
                    name: id.to_owned(),
                }
                .is_built_in()
            );
        }
        assert!(
            !Role {
                id: new_id(),
                name: "heat_stack_owner".into(),
            }
            .is_built_in()
        );
        assert_eq!(given_or_new_id("role id", "").map(|id| id.len()), Ok(32));
        assert_eq!(given_or_new_id("role id", "r-1"), Ok("r-1".to_owned()));
        assert!(matches!(
            given_or_new_id("role id", "r 1"),
            Err(IdentityError::Invalid(message)) if message.starts_with("role id \"r 1\"")
        ));
        assert!(check_email("ops@example.com").is_ok());
        assert!(check_email(&"e".repeat(256)).is_err());
        assert!(check_email("a\nb").is_err());
        assert_eq!(non_empty(""), None);
    }

    fn details(user: &str, project: &str, issued_at: i64) -> TokenDetails {
        let mut details = TokenDetails::new(
            Identity::new(user, project, vec!["member".into()]),
            Duration::from_secs(60),
        );
        details.issued_at = issued_at / 1000;
        details.issued_at_ms = issued_at;
        details
    }

    fn revocation(
        token_id: Option<&str>,
        user: Option<&str>,
        project: Option<&str>,
        issued_before: i64,
    ) -> Revocation {
        Revocation {
            id: 1,
            token_id: token_id.map(str::to_owned),
            user_id: user.map(str::to_owned),
            project_id: project.map(str::to_owned),
            issued_before,
            expires_at: Utc::now(),
        }
    }

    #[test]
    fn revocations_match_their_token_or_the_tokens_issued_before_them() {
        let token = details("alice", "a", 100);
        assert!(revocation(Some(&token.token_id), None, None, 0).revokes(&token));
        assert!(!revocation(Some("another"), None, None, 0).revokes(&token));
        // Alice lost her role on project a at 100: tokens of then and
        // before are refused, later ones and other projects' are not.
        let lost_role = revocation(None, Some("alice"), Some("a"), 100);
        assert!(lost_role.revokes(&token));
        assert!(!lost_role.revokes(&details("alice", "a", 101)));
        assert!(!lost_role.revokes(&details("alice", "b", 50)));
        assert!(!lost_role.revokes(&details("bob", "a", 50)));
        // A deleted user or project: every token of it.
        assert!(revocation(None, Some("alice"), None, 100).revokes(&details("alice", "b", 99)));
        assert!(revocation(None, None, Some("a"), 100).revokes(&details("bob", "a", 99)));
        assert!(!revocation(None, None, None, 100).revokes(&token));
    }
}
