//! The openstack backend's hold on the cloud: Ember's service user, the
//! delegations (Keystone trusts) through which it acts for users, and one
//! session per trust, shared by every resource of the stacks, instances
//! and clusters acting through it.
//!
//! A user's work on the cloud is always done as that user, in their
//! project: a request makes a trust from the user to Ember's service user
//! with the user's own token (only a trustor may delegate) and every later
//! call — the create that runs after the request returned, updates,
//! signals, deadlines, resumes after a crash — authenticates as the
//! service user scoped to that trust. Another project's trust is never
//! reachable: a stack finds the delegation of its own root, an instance
//! carries its own.

pub mod simulated;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use ember_openstack::keystone::{Keystone, NewTrust};
use ember_openstack::{
    Cloud, CloudConfig, Credentials, Domain, Method, Named, Scope, Secret, Session,
};
use ember_runtime::Identity;
use ember_runtime::identity::SubjectToken;
use tracing::{info, warn};
use uuid::Uuid;

use crate::domain::delegation::{Delegation, DelegationOwner, TrustOwnership};
use crate::error::{Error, Result};
use crate::store::delegations::DelegationStore;

/// Ember's service user on the cloud: the trustee of every trust.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServiceAccount {
    pub user: String,
    pub password: String,
    pub user_domain: String,
    pub project: String,
    pub project_domain: String,
}

/// Where the cloud is and who Ember is on it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpenStackConfig {
    pub cloud: CloudConfig,
    pub account: ServiceAccount,
}

/// The most trust sessions kept at once (each holds a token); beyond it
/// the least recently made are dropped and made again when needed.
const SESSIONS_KEPT: usize = 4096;

pub struct OpenStackCloud {
    cloud: Arc<Cloud>,
    /// Ember's own password login (scoped to trusts for acting).
    login: Method,
    /// Ember itself, in its own project: its user id for trusts, and
    /// listings across projects.
    service: Session,
    sessions: Mutex<HashMap<String, Session>>,
    delegations: Arc<dyn DelegationStore>,
}

impl std::fmt::Debug for OpenStackCloud {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpenStackCloud")
            .field("cloud", &self.cloud)
            .finish()
    }
}

impl OpenStackCloud {
    /// Fails only on a bad configuration (a CA file); the cloud is first
    /// asked when a request needs it.
    pub fn new(
        config: &OpenStackConfig,
        delegations: Arc<dyn DelegationStore>,
    ) -> std::result::Result<Arc<OpenStackCloud>, String> {
        let cloud = Cloud::new(config.cloud.clone())?;
        let login = Method::Password {
            user: Named::Name {
                name: config.account.user.clone(),
                domain: Domain::Name(config.account.user_domain.clone()),
            },
            password: Secret::new(config.account.password.clone()),
        };
        let service = cloud.session(Credentials {
            method: login.clone(),
            scope: Scope::Project(Named::Name {
                name: config.account.project.clone(),
                domain: Domain::Name(config.account.project_domain.clone()),
            }),
        });
        Ok(Arc::new(OpenStackCloud {
            cloud,
            login,
            service,
            sessions: Mutex::default(),
            delegations,
        }))
    }

    /// Ember's own session (its service project).
    pub fn service_session(&self) -> &Session {
        &self.service
    }

    /// The session acting through `delegation`'s trust.
    pub fn session_for(&self, delegation: &Delegation) -> Session {
        let mut sessions = match self.sessions.lock() {
            Ok(sessions) => sessions,
            Err(poisoned) => poisoned.into_inner(),
        };
        if let Some(session) = sessions.get(&delegation.trust_id) {
            return session.clone();
        }
        if sessions.len() >= SESSIONS_KEPT {
            sessions.clear();
        }
        let session = self.cloud.session(Credentials {
            method: self.login.clone(),
            scope: Scope::Trust(delegation.trust_id.clone()),
        });
        sessions.insert(delegation.trust_id.clone(), session.clone());
        session
    }

    /// The session a stack's resources act through: its root's delegation.
    pub async fn stack_session(&self, stack_id: Uuid) -> Result<Session> {
        match self.delegations.delegation_of_stack(stack_id).await? {
            Some(delegation) => Ok(self.session_for(&delegation)),
            None => Err(Error::Forbidden(format!(
                "stack {stack_id} has no delegation to act on the cloud through (it was made without a Keystone token)"
            ))),
        }
    }

    /// The delegation a stack acts through: its root's.
    pub async fn stack_delegation(&self, stack_id: Uuid) -> Result<Delegation> {
        self.delegations
            .delegation_of_stack(stack_id)
            .await?
            .ok_or_else(|| {
                Error::Forbidden(format!(
                    "stack {stack_id} has no delegation to act on the cloud through (it was made without a Keystone token)"
                ))
            })
    }

    /// `owner`'s own delegation, if it has one.
    pub async fn delegation_of(&self, owner: DelegationOwner) -> Result<Option<Delegation>> {
        self.delegations.delegation_of(owner).await
    }

    /// The session acting through `owner`'s own delegation.
    pub async fn owner_session(&self, owner: DelegationOwner) -> Result<Session> {
        match self.delegations.delegation_of(owner).await? {
            Some(delegation) => Ok(self.session_for(&delegation)),
            None => Err(Error::Forbidden(format!(
                "{} {} has no delegation to act on the cloud through",
                owner.kind(),
                owner.id()
            ))),
        }
    }

    /// Makes `caller`'s trust for `owner` with the caller's own token and
    /// records it: every role the caller holds in the project, delegated
    /// to Ember's service user with impersonation (Heat's default).
    pub async fn delegate(
        &self,
        owner: DelegationOwner,
        caller: &Identity,
        token: Option<&SubjectToken>,
    ) -> Result<Delegation> {
        let Some(token) = token else {
            return Err(Error::Forbidden(
                "the openstack backend acts for users through Keystone trusts, made with the caller's own Keystone token: \
                 call through a gateway with auth.mode = \"keystone\" (this request carried no Keystone token)"
                    .to_owned(),
            ));
        };
        let trustee = self.service.token().await?;
        let user = self.cloud.session(Credentials {
            method: Method::Token(Secret::new(token.expose())),
            scope: Scope::Project(Named::Id(caller.project_id.clone())),
        });
        let trust = Keystone::new(&user)
            .create_trust(&NewTrust {
                trustor_user_id: caller.user_id.clone(),
                trustee_user_id: trustee.user_id.clone(),
                project_id: caller.project_id.clone(),
                role_names: caller.roles.clone(),
                impersonation: true,
                expires_at: None,
            })
            .await?;
        let delegation = Delegation {
            trust_id: trust.id,
            trustor_user_id: caller.user_id.clone(),
            project_id: caller.project_id.clone(),
        };
        if let Err(error) = self
            .delegations
            .record_delegation(owner, &delegation, TrustOwnership::Owns)
            .await
        {
            self.delete_trust(&delegation, Some(token)).await;
            return Err(error);
        }
        info!(owner = owner.kind(), owner_id = %owner.id(), trust_id = %delegation.trust_id, "delegation made");
        Ok(delegation)
    }

    /// Records that `owner` acts through `delegation`, another's trust (a
    /// cluster node's stack through its cluster's): forgetting it later
    /// leaves the trust to its owner.
    pub async fn lend(&self, owner: DelegationOwner, delegation: &Delegation) -> Result<()> {
        self.delegations
            .record_delegation(owner, delegation, TrustOwnership::Borrows)
            .await
    }

    /// Deletes `owner`'s trust and forgets it: with the trustor's own
    /// token when the request carries one, else as Ember's service user (an
    /// admin, as Keystone's policy asks). A trust Keystone no longer has is
    /// deleted; one that cannot be deleted now is logged and forgotten (it
    /// acts for no stack any more).
    pub async fn revoke(&self, owner: DelegationOwner, token: Option<&SubjectToken>) -> Result<()> {
        let Some(delegation) = self.delegations.delegation_of(owner).await? else {
            return Ok(());
        };
        if self.delegations.owns_trust(owner).await? {
            self.delete_trust(&delegation, token).await;
        }
        self.delegations.forget_delegation(owner).await?;
        if let Ok(mut sessions) = self.sessions.lock() {
            sessions.remove(&delegation.trust_id);
        }
        info!(owner = owner.kind(), owner_id = %owner.id(), trust_id = %delegation.trust_id, "delegation deleted");
        Ok(())
    }

    async fn delete_trust(&self, delegation: &Delegation, token: Option<&SubjectToken>) {
        if let Some(token) = token {
            let trustor = self.cloud.session(Credentials {
                method: Method::Token(Secret::new(token.expose())),
                scope: Scope::Project(Named::Id(delegation.project_id.clone())),
            });
            match Keystone::new(&trustor)
                .delete_trust(&delegation.trust_id)
                .await
            {
                Ok(()) => return,
                // Not the trustor (an admin of another project deleting):
                // Ember's service user deletes it.
                Err(error) => {
                    info!(trust_id = %delegation.trust_id, %error, "the caller cannot delete the trust; the service user does")
                }
            }
        }
        if let Err(error) = Keystone::new(&self.service)
            .delete_trust(&delegation.trust_id)
            .await
        {
            warn!(trust_id = %delegation.trust_id, %error, "cannot delete a trust");
        }
    }
}
