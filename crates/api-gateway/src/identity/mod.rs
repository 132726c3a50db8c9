//! The gateway's built-in identity: projects, users (argon2 password
//! hashes), role assignments and revocations, in the gateway's own store —
//! what the Keystone v3 front door at `/identity` authenticates against and
//! the admin-only `ember.identity.v1.IdentityAdminService` manages.
//!
//! Ember has one domain, Keystone's `Default` (id `default`). A token the
//! front door issues is an Ember token like any other (the same signed JWT,
//! with the user's and project's names and the methods added); revoking it,
//! or taking away what it stood for (a role, a user, a project, a password),
//! refuses it on every gateway replica: each one reads new revocations
//! from the shared store every [`REVOCATION_POLL`]. Wrong passwords are
//! counted in the store too, so Keystone's account lockout ([`Lockout`])
//! holds on every replica; `throttle` bounds how fast one address may ask.

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

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Project {
    pub id: String,
    pub name: String,
    pub description: String,
    pub created_at: DateTime<Utc>,
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

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Assignment {
    pub user_id: String,
    pub project_id: String,
    pub role: String,
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
    #[error("{0}")]
    Conflict(String),
    #[error("{0}")]
    Invalid(String),
    #[error("identity store: {0}")]
    Database(String),
}

impl IdentityError {
    pub fn kind(&self) -> ErrorKind {
        match self {
            IdentityError::NotFound(_) => ErrorKind::NotFound,
            IdentityError::Conflict(_) => ErrorKind::Conflict,
            IdentityError::Invalid(_) => ErrorKind::InvalidInput,
            IdentityError::Database(_) => ErrorKind::Unavailable,
        }
    }

    pub fn into_status(self) -> tonic::Status {
        tonic::Status::new(self.kind().grpc_code(), self.to_string())
    }
}

type Result<T> = std::result::Result<T, IdentityError>;

/// Checks a user, project or role name (or a given id): 1 to 64 letters,
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

    pub async fn create_project(&self, name: &str, description: &str, id: &str) -> Result<Project> {
        check_name("project name", name)?;
        let id = if id.is_empty() {
            new_id()
        } else {
            id.to_owned()
        };
        check_name("project id", &id)?;
        if description.len() > 1024 {
            return Err(IdentityError::Invalid(
                "the project's description must have at most 1024 bytes".to_owned(),
            ));
        }
        let project = Project {
            id,
            name: name.to_owned(),
            description: description.to_owned(),
            created_at: ember_runtime::time::now(),
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

    pub async fn find_user(&self, name_or_id: &str) -> Result<User> {
        self.store
            .find_user(name_or_id)
            .await?
            .ok_or_else(|| IdentityError::NotFound(format!("user {name_or_id:?}")))
    }

    pub async fn delete_project(&self, name_or_id: &str) -> Result<()> {
        let project = self.find_project(name_or_id).await?;
        self.store
            .delete_project(&project, revocation_expiry())
            .await?;
        self.refresh().await
    }

    pub async fn create_user(
        &self,
        name: &str,
        password: &str,
        id: &str,
        default_project: &str,
    ) -> Result<User> {
        check_name("user name", name)?;
        let id = if id.is_empty() {
            new_id()
        } else {
            id.to_owned()
        };
        check_name("user id", &id)?;
        password::check_new(password).map_err(IdentityError::Invalid)?;
        let default_project_id = if default_project.is_empty() {
            None
        } else {
            Some(self.find_project(default_project).await?.id)
        };
        let password = password.to_owned();
        let password_hash = tokio::task::spawn_blocking(move || password::hash(&password))
            .await
            .map_err(|error| IdentityError::Database(error.to_string()))?
            .map_err(IdentityError::Database)?;
        let user = User {
            id,
            name: name.to_owned(),
            password_hash,
            default_project_id,
            created_at: ember_runtime::time::now(),
            failed_auth_count: 0,
            failed_auth_at: None,
        };
        self.store.create_user(&user).await?;
        Ok(user)
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

    /// Resolves names to ids and checks the role's name.
    async fn assignment(&self, user: &str, project: &str, role: &str) -> Result<Assignment> {
        check_name("role", role)?;
        Ok(Assignment {
            user_id: self.find_user(user).await?.id,
            project_id: self.find_project(project).await?.id,
            role: role.to_owned(),
        })
    }

    pub async fn add_role(&self, user: &str, project: &str, role: &str) -> Result<Assignment> {
        let assignment = self.assignment(user, project, role).await?;
        self.store.add_role(&assignment).await?;
        Ok(assignment)
    }

    pub async fn remove_role(&self, user: &str, project: &str, role: &str) -> Result<()> {
        let assignment = self.assignment(user, project, role).await?;
        if !self
            .store
            .remove_role(&assignment, revocation_expiry())
            .await?
        {
            return Err(IdentityError::NotFound(format!(
                "role {role:?} of user {user:?} on project {project:?}"
            )));
        }
        self.refresh().await
    }

    pub async fn list_assignments(&self, user: &str, project: &str) -> Result<Vec<Assignment>> {
        let user_id = if user.is_empty() {
            None
        } else {
            Some(self.find_user(user).await?.id)
        };
        let project_id = if project.is_empty() {
            None
        } else {
            Some(self.find_project(project).await?.id)
        };
        self.store
            .list_assignments(user_id.as_deref(), project_id.as_deref())
            .await
    }
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
