//! Keystone beyond tokens: trusts, through which Ember acts for a user
//! after the user's own token has expired (Heat's deferred authentication).
//! A trust is made with the user's token (only the trustor may delegate),
//! names Ember's service user as trustee, and carries the user's roles in
//! the project; Ember then asks for tokens with its own password scoped to
//! the trust, and they act as the user (impersonation).

use chrono::{DateTime, Utc};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::auth::Role;
use crate::error::{Result, Service};
use crate::session::{Call, Session, segment};

/// A trust to make.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewTrust {
    pub trustor_user_id: String,
    pub trustee_user_id: String,
    pub project_id: String,
    /// The roles delegated, by name (all the trustor holds in the project,
    /// as Heat delegates by default).
    pub role_names: Vec<String>,
    /// Tokens of the trust act as the trustor.
    pub impersonation: bool,
    pub expires_at: Option<DateTime<Utc>>,
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Trust {
    pub id: String,
    pub trustor_user_id: String,
    pub trustee_user_id: String,
    #[serde(default)]
    pub project_id: Option<String>,
    #[serde(default)]
    pub impersonation: bool,
    #[serde(default)]
    pub roles: Vec<Role>,
    #[serde(default)]
    pub expires_at: Option<String>,
}

#[derive(Deserialize)]
struct TrustAnswer {
    trust: Trust,
}

/// Keystone, through one session.
#[derive(Debug, Clone)]
pub struct Keystone {
    session: Session,
}

impl Keystone {
    pub fn new(session: &Session) -> Keystone {
        Keystone {
            session: session.clone(),
        }
    }

    /// Makes a trust; the session must be the trustor's.
    pub async fn create_trust(&self, trust: &NewTrust) -> Result<Trust> {
        let mut body = json!({
            "trustor_user_id": trust.trustor_user_id,
            "trustee_user_id": trust.trustee_user_id,
            "project_id": trust.project_id,
            "impersonation": trust.impersonation,
            "roles": trust.role_names.iter().map(|name| json!({"name": name})).collect::<Vec<_>>(),
        });
        if let Some(expires_at) = trust.expires_at {
            body["expires_at"] =
                Value::String(expires_at.format("%Y-%m-%dT%H:%M:%S%.6fZ").to_string());
        }
        let answer = self
            .session
            .call(Call::post(
                Service::Identity,
                "/OS-TRUST/trusts",
                json!({ "trust": body }),
            ))
            .await?;
        Ok(answer.json::<TrustAnswer>()?.trust)
    }

    /// The trust, or `None` when it is gone.
    pub async fn trust(&self, trust_id: &str) -> Result<Option<Trust>> {
        match self
            .session
            .call_found(Call::get(
                Service::Identity,
                format!("/OS-TRUST/trusts/{}", segment(trust_id)),
            ))
            .await?
        {
            Some(answer) => Ok(Some(answer.json::<TrustAnswer>()?.trust)),
            None => Ok(None),
        }
    }

    /// The ids of the projects `name_or_id` may name, as Heat's keystone
    /// plugin looks: the project of that id alone if there is one, else
    /// those of that name the caller may see (several, in several
    /// domains; none, when there is no such project).
    pub async fn project_ids(&self, name_or_id: &str) -> Result<Vec<String>> {
        if let Some(answer) = self
            .session
            .call_found(Call::get(
                Service::Identity,
                format!("/projects/{}", segment(name_or_id)),
            ))
            .await?
        {
            let project: Value = answer.json()?;
            if let Some(id) = project["project"]["id"].as_str() {
                return Ok(vec![id.to_owned()]);
            }
        }
        let answer: Value = self
            .session
            .call(Call::get(Service::Identity, "/projects").query("name", name_or_id))
            .await?
            .json()?;
        Ok(answer["projects"]
            .as_array()
            .map(|projects| {
                projects
                    .iter()
                    .filter_map(|project| project["id"].as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default())
    }

    /// Deletes the trust; one already gone is deleted.
    pub async fn delete_trust(&self, trust_id: &str) -> Result<()> {
        self.session
            .call_removing(Call::delete(
                Service::Identity,
                format!("/OS-TRUST/trusts/{}", segment(trust_id)),
            ))
            .await
    }
}
