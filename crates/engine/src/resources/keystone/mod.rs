//! Heat's `OS::Keystone::*` resource types — projects, users, roles,
//! groups, and the role assignments of users and groups — made in the
//! identity in use: the external Keystone of the openstack backend (through
//! the stack's trust, as Heat acts), or the gateway's built-in identity
//! (`ember dev`, the docker and simulated backends), reached over its
//! `IdentityAdminService` as the stack's owner ([`builtin`]).
//!
//! Either way the identity decides who may: Keystone's policy (and the
//! built-in identity's rule) lets only an admin of the stack's project make
//! identities, so a member's stack fails at its first Keystone resource
//! with the identity's own refusal. A later update or delete acts as the
//! stack's owner again, with the roles the owner holds then.
//!
//! What the types share lives here: the [`IdentityBackend`] they act
//! through, the fields they set ([`Fields`]), and Heat's role-assignment
//! mixin (the `roles` property of users, groups and the two assignment
//! types: [`assignments`]).

mod assignments;
pub mod builtin;
pub mod cloud;
mod objects;

use std::sync::Arc;

use async_trait::async_trait;
pub use ember_openstack::keystone::{Actor, Kind, Target};
use serde_json::{Map, Value, json};
use uuid::Uuid;

use super::{ResourceFailure, ResourceRequest, ResourceTypeRegistry};
use crate::domain::Resource;

/// Whom the identity is asked as: the stack's owner, in the stack's
/// project (the openstack backend finds the stack's trust by its id).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Acting {
    pub stack_id: Uuid,
    pub user_id: String,
    pub project_id: String,
}

/// Private-data key: whom the resource acted as when it was made.
const ACTING: &str = "acting";

impl Acting {
    pub fn of_request(request: &ResourceRequest) -> Acting {
        Acting {
            stack_id: request.stack_id,
            user_id: request.user_id.clone(),
            project_id: request.project_id.clone(),
        }
    }

    /// Whom `current` acted as (recorded in its private data by
    /// [`Acting::record`]).
    pub fn of_resource(current: &Resource) -> Result<Acting, ResourceFailure> {
        let recorded = &current.data[ACTING];
        match (
            recorded["user_id"].as_str(),
            recorded["project_id"].as_str(),
        ) {
            (Some(user_id), Some(project_id)) => Ok(Acting {
                stack_id: current.stack_id,
                user_id: user_id.to_owned(),
                project_id: project_id.to_owned(),
            }),
            _ => Err(ResourceFailure::new(format!(
                "{} recorded no owner to act as (it was never made)",
                current.name
            ))),
        }
    }

    /// The private data that records it, beside `extra`'s keys.
    pub fn record(&self, mut extra: Map<String, Value>) -> Value {
        extra.insert(
            ACTING.to_owned(),
            json!({"user_id": self.user_id, "project_id": self.project_id}),
        );
        Value::Object(extra)
    }
}

/// The fields of an identity object the types set, by Keystone's names.
/// References (`domain`, `default_project`, `parent`) are names or ids;
/// the backend resolves them. `None` leaves a field as it is.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Fields {
    pub name: Option<String>,
    pub description: Option<String>,
    pub enabled: Option<bool>,
    pub email: Option<String>,
    pub password: Option<String>,
    pub default_project: Option<String>,
    pub domain: Option<String>,
    pub parent: Option<String>,
    pub tags: Option<Vec<String>>,
}

/// A role given to a user or group (by id) on a project or domain (by
/// name or id); the role by name or id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Grant {
    pub role: String,
    pub actor: Actor,
    pub target: Target,
}

/// The identity the types act on.
#[async_trait]
pub trait IdentityBackend: Send + Sync + 'static {
    /// Refuses, by name, what of a `kind`'s properties this identity
    /// cannot honour (see `ResourceType::refuse_unhonoured`).
    fn refuse_unhonoured(&self, kind: Kind, properties: &Map<String, Value>) -> Result<(), String>;

    /// Makes the object; returns it as the identity shows it (Keystone's
    /// field names: `id`, `name`, `domain_id`, …).
    async fn create(
        &self,
        acting: &Acting,
        kind: Kind,
        fields: &Fields,
    ) -> Result<Value, ResourceFailure>;

    /// Changes the fields given; returns the object.
    async fn update(
        &self,
        acting: &Acting,
        kind: Kind,
        id: &str,
        fields: &Fields,
    ) -> Result<Value, ResourceFailure>;

    /// The object, or `None` when it is gone.
    async fn show(
        &self,
        acting: &Acting,
        kind: Kind,
        id: &str,
    ) -> Result<Option<Value>, ResourceFailure>;

    /// Deletes the object; one already gone is deleted.
    async fn delete(&self, acting: &Acting, kind: Kind, id: &str) -> Result<(), ResourceFailure>;

    /// The id of the one object `name_or_id` names; `None` when there is
    /// none (several of one name is a failure asking for an id).
    async fn find(
        &self,
        acting: &Acting,
        kind: Kind,
        name_or_id: &str,
    ) -> Result<Option<String>, ResourceFailure>;

    /// [`IdentityBackend::find`], with a failure naming what is missing.
    async fn id_of(
        &self,
        acting: &Acting,
        kind: Kind,
        name_or_id: &str,
    ) -> Result<String, ResourceFailure> {
        self.find(acting, kind, name_or_id).await?.ok_or_else(|| {
            ResourceFailure::new(format!(
                "The {} ({name_or_id}) could not be found.",
                kind.member()
            ))
        })
    }

    /// Gives the role (idempotent).
    async fn grant(&self, acting: &Acting, grant: &Grant) -> Result<(), ResourceFailure>;

    /// Takes the role back; one not held — or whose role, project or
    /// domain is gone — is taken back.
    async fn revoke(&self, acting: &Acting, grant: &Grant) -> Result<(), ResourceFailure>;

    /// Adds the user to the group (ids; idempotent).
    async fn add_member(
        &self,
        acting: &Acting,
        group_id: &str,
        user_id: &str,
    ) -> Result<(), ResourceFailure>;

    /// Takes the user out of the group; one not in it, or gone, is out.
    async fn remove_member(
        &self,
        acting: &Acting,
        group_id: &str,
        user_id: &str,
    ) -> Result<(), ResourceFailure>;
}

/// Who a role goes to: the user or group (by `kind`) of that id.
fn actor_of(kind: Kind, id: &str) -> Actor {
    match kind {
        Kind::Group => Actor::Group(id.to_owned()),
        _ => Actor::User(id.to_owned()),
    }
}

/// A property as text, if given and not empty.
fn text(properties: &Map<String, Value>, name: &str) -> Option<String> {
    match properties.get(name) {
        Some(Value::String(text)) if !text.is_empty() => Some(text.clone()),
        _ => None,
    }
}

/// A list of texts, if given.
fn texts(properties: &Map<String, Value>, name: &str) -> Option<Vec<String>> {
    properties.get(name).and_then(Value::as_array).map(|items| {
        items
            .iter()
            .filter_map(|item| item.as_str().map(str::to_owned))
            .collect()
    })
}

/// The name an object gets: the `name` property, else Heat's physical
/// resource name (kept across updates).
fn name_of(properties: &Map<String, Value>, fallback: impl FnOnce() -> String) -> String {
    text(properties, "name").unwrap_or_else(fallback)
}

/// The schemas of every type [`register`] registers.
pub fn schemas() -> Vec<super::ResourceTypeSchema> {
    vec![
        objects::schema(Kind::Project),
        objects::schema(Kind::User),
        objects::schema(Kind::Role),
        objects::schema(Kind::Group),
        assignments::user_schema(),
        assignments::group_schema(),
    ]
}

/// Registers the Keystone types, acting on `identity`.
pub fn register(registry: &mut ResourceTypeRegistry, identity: Arc<dyn IdentityBackend>) {
    for kind in [Kind::Project, Kind::User, Kind::Role, Kind::Group] {
        registry.register(Arc::new(objects::ObjectResource::new(
            kind,
            identity.clone(),
        )));
    }
    registry.register(Arc::new(assignments::AssignmentResource::user(
        identity.clone(),
    )));
    registry.register(Arc::new(assignments::AssignmentResource::group(identity)));
}
