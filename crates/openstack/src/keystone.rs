//! Keystone beyond tokens: trusts, through which Ember acts for a user
//! after the user's own token has expired (Heat's deferred authentication),
//! and the identity objects Heat's `OS::Keystone::*` resource types make.
//! A trust is made with the user's token (only the trustor may delegate),
//! names Ember's service user as trustee, and carries the user's roles in
//! the project; Ember then asks for tokens with its own password scoped to
//! the trust, and they act as the user (impersonation).

use chrono::{DateTime, Utc};
use serde::Deserialize;
use serde_json::{Value, json};

use http::Method;

use crate::auth::Role;
use crate::error::{Error, Result, Service};
use crate::session::{Call, Session, segment};

/// The kinds of identity object Keystone's v3 API keeps in collections of
/// their own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Project,
    User,
    Role,
    Group,
    Domain,
}

impl Kind {
    /// The collection's path segment (`projects`).
    pub fn collection(self) -> &'static str {
        match self {
            Kind::Project => "projects",
            Kind::User => "users",
            Kind::Role => "roles",
            Kind::Group => "groups",
            Kind::Domain => "domains",
        }
    }

    /// The key one object is wrapped in (`project`), and its name in
    /// messages.
    pub fn member(self) -> &'static str {
        match self {
            Kind::Project => "project",
            Kind::User => "user",
            Kind::Role => "role",
            Kind::Group => "group",
            Kind::Domain => "domain",
        }
    }
}

/// Who holds a role.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Actor {
    User(String),
    Group(String),
}

/// Where a role is held.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    Project(String),
    Domain(String),
}

/// `PUT|DELETE /{projects|domains}/{id}/{users|groups}/{id}/roles/{role}`.
fn grant_path(target: &Target, actor: &Actor, role_id: &str) -> String {
    let target = match target {
        Target::Project(id) => format!("projects/{}", segment(id)),
        Target::Domain(id) => format!("domains/{}", segment(id)),
    };
    let actor = match actor {
        Actor::User(id) => format!("users/{}", segment(id)),
        Actor::Group(id) => format!("groups/{}", segment(id)),
    };
    format!("/{target}/{actor}/roles/{}", segment(role_id))
}

/// The object in an answer wrapped as `{"<kind>": {...}}`.
fn unwrap_object(kind: Kind, mut answer: Value) -> Result<Value> {
    match answer.get_mut(kind.member()).map(Value::take) {
        Some(object @ Value::Object(_)) => Ok(object),
        _ => Err(Error::Decode {
            service: Service::Identity,
            message: format!("no {} object in the answer", kind.member()),
        }),
    }
}

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

    /// The ids of the projects `name_or_id` may name (see
    /// [`Keystone::ids_of`]).
    pub async fn project_ids(&self, name_or_id: &str) -> Result<Vec<String>> {
        self.ids_of(Kind::Project, name_or_id).await
    }

    /// Makes an object of `kind` from `fields` (Keystone's own field names)
    /// and returns it as Keystone shows it.
    pub async fn create(&self, kind: Kind, fields: Value) -> Result<Value> {
        let answer = self
            .session
            .call(Call::post(
                Service::Identity,
                format!("/{}", kind.collection()),
                json!({ kind.member(): fields }),
            ))
            .await?;
        unwrap_object(kind, answer.json()?)
    }

    /// Changes the `fields` given of an object (PATCH) and returns it.
    pub async fn update(&self, kind: Kind, id: &str, fields: Value) -> Result<Value> {
        let answer = self
            .session
            .call(
                Call::new(
                    Service::Identity,
                    Method::PATCH,
                    format!("/{}/{}", kind.collection(), segment(id)),
                )
                .body(json!({ kind.member(): fields })),
            )
            .await?;
        unwrap_object(kind, answer.json()?)
    }

    /// The object, or `None` when there is none of that id.
    pub async fn get(&self, kind: Kind, id: &str) -> Result<Option<Value>> {
        match self
            .session
            .call_found(Call::get(
                Service::Identity,
                format!("/{}/{}", kind.collection(), segment(id)),
            ))
            .await?
        {
            Some(answer) => Ok(Some(unwrap_object(kind, answer.json()?)?)),
            None => Ok(None),
        }
    }

    /// Deletes the object; one already gone is deleted.
    pub async fn delete(&self, kind: Kind, id: &str) -> Result<()> {
        self.session
            .call_removing(Call::delete(
                Service::Identity,
                format!("/{}/{}", kind.collection(), segment(id)),
            ))
            .await
    }

    /// The ids `name_or_id` may name, as Heat's keystone plugin looks: the
    /// object of that id alone if there is one, else those of that name
    /// the caller may see (several in several domains; none when there is
    /// no such object).
    pub async fn ids_of(&self, kind: Kind, name_or_id: &str) -> Result<Vec<String>> {
        if let Some(object) = self.get(kind, name_or_id).await?
            && let Some(id) = object["id"].as_str()
        {
            return Ok(vec![id.to_owned()]);
        }
        let answer: Value = self
            .session
            .call(
                Call::get(Service::Identity, format!("/{}", kind.collection()))
                    .query("name", name_or_id),
            )
            .await?
            .json()?;
        Ok(answer[kind.collection()]
            .as_array()
            .map(|objects| {
                objects
                    .iter()
                    .filter_map(|object| object["id"].as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default())
    }

    /// Gives `actor` the role (by id) on `target` (idempotent).
    pub async fn grant(&self, target: &Target, actor: &Actor, role_id: &str) -> Result<()> {
        self.session
            .call(Call::new(
                Service::Identity,
                Method::PUT,
                grant_path(target, actor, role_id),
            ))
            .await
            .map(drop)
    }

    /// Takes the role back; one not held is taken back.
    pub async fn revoke(&self, target: &Target, actor: &Actor, role_id: &str) -> Result<()> {
        self.session
            .call_removing(Call::delete(
                Service::Identity,
                grant_path(target, actor, role_id),
            ))
            .await
    }

    /// Adds a user to a group (idempotent).
    pub async fn add_to_group(&self, group_id: &str, user_id: &str) -> Result<()> {
        self.session
            .call(Call::new(
                Service::Identity,
                Method::PUT,
                format!("/groups/{}/users/{}", segment(group_id), segment(user_id)),
            ))
            .await
            .map(drop)
    }

    /// Takes a user out of a group; one not in it is out.
    pub async fn remove_from_group(&self, group_id: &str, user_id: &str) -> Result<()> {
        self.session
            .call_removing(Call::delete(
                Service::Identity,
                format!("/groups/{}/users/{}", segment(group_id), segment(user_id)),
            ))
            .await
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
