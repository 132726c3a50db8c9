//! Heat's role-assignment mixin — the `roles` property of users and
//! groups: a list of `{role, project}` or `{role, domain}` — and the two
//! types made of it alone, `OS::Keystone::UserRoleAssignment` and
//! `OS::Keystone::GroupRoleAssignment`.
//!
//! As in Heat an update gives what the new list adds and takes back what it
//! drops (entries compared as written), and a delete takes back every role
//! the list gives. Unlike Heat, when the user (or group) itself changes,
//! the old one's roles are taken back and the new one is given them all
//! (Heat gives the new one only the difference and leaves the old one's).

use std::collections::BTreeSet;
use std::sync::Arc;

use async_trait::async_trait;
use serde_json::{Map, Value, json};

use super::{Acting, Actor, Grant, IdentityBackend, Kind, Target, actor_of, text};
use crate::domain::Resource;
use crate::resources::{
    PropertySchema, PropertyType, ResourceFailure, ResourceOutcome, ResourceRequest, ResourceType,
    ResourceTypeSchema,
};

/// The `roles` property, as every type with the mixin has it.
pub fn roles_property() -> PropertySchema {
    PropertySchema::new(
        "roles",
        PropertyType::List,
        "List of role assignments: maps of role (name or id) with either project or domain (name or id).",
    )
    .update_allowed()
}

/// Heat's checks of the list as written: each entry names a role and
/// exactly one of project and domain (values given by functions are
/// checked when the resource is made).
pub fn check_roles(properties: &Map<String, Value>) -> Result<(), String> {
    let Some(Value::Array(entries)) = properties.get("roles") else {
        return Ok(());
    };
    for entry in entries {
        let Value::Object(entry) = entry else {
            continue;
        };
        if is_function(entry) {
            continue;
        }
        if let Some(unknown) = entry
            .keys()
            .find(|key| !matches!(key.as_str(), "role" | "project" | "domain"))
        {
            return Err(format!("roles: Unknown Property {unknown}"));
        }
        let role = entry
            .get("role")
            .filter(|role| !role.is_null())
            .ok_or_else(|| "roles: Property role not assigned".to_owned())?;
        let given = |key: &str| entry.get(key).is_some_and(|value| !value.is_null());
        match (given("project"), given("domain")) {
            (true, true) => {
                return Err(
                    "Cannot define the following properties at the same time: project, domain"
                        .to_owned(),
                );
            }
            (false, false) => {
                return Err(format!(
                    "Either project or domain must be specified for role {}",
                    role.as_str()
                        .map_or_else(|| role.to_string(), str::to_owned)
                ));
            }
            _ => {}
        }
    }
    Ok(())
}

/// An intrinsic function in place of an entry (`{get_param: …}`).
fn is_function(entry: &Map<String, Value>) -> bool {
    entry.len() == 1
        && entry
            .keys()
            .next()
            .is_some_and(|key| key.starts_with("get_") || key.starts_with("Fn::") || key == "Ref")
}

/// Where an entry gives its role, as written (a name or an id): a
/// [`Target`] that can be ordered, so the lists compare as sets.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum Place {
    Project(String),
    Domain(String),
}

/// One entry of the list, resolved: the role and where it is held.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Wanted {
    role: String,
    place: Place,
}

impl Wanted {
    fn target(&self) -> Target {
        match &self.place {
            Place::Project(project) => Target::Project(project.clone()),
            Place::Domain(domain) => Target::Domain(domain.clone()),
        }
    }
}

/// The roles `properties` give, once resolved.
fn wanted(properties: &Map<String, Value>) -> Result<BTreeSet<Wanted>, ResourceFailure> {
    check_roles(properties).map_err(ResourceFailure::new)?;
    let Some(Value::Array(entries)) = properties.get("roles") else {
        return Ok(BTreeSet::new());
    };
    entries
        .iter()
        .map(|entry| {
            let entry = entry.as_object().ok_or_else(|| {
                ResourceFailure::new("roles: each entry must be a map".to_owned())
            })?;
            let role = text(entry, "role").ok_or_else(|| {
                ResourceFailure::new("roles: Property role not assigned".to_owned())
            })?;
            let place = match (text(entry, "project"), text(entry, "domain")) {
                (Some(project), _) => Place::Project(project),
                (None, Some(domain)) => Place::Domain(domain),
                (None, None) => {
                    return Err(ResourceFailure::new(format!(
                        "Either project or domain must be specified for role {role}"
                    )));
                }
            };
            Ok(Wanted { role, place })
        })
        .collect()
}

fn grant_of(actor: &Actor, wanted: &Wanted) -> Grant {
    Grant {
        role: wanted.role.clone(),
        actor: actor.clone(),
        target: wanted.target(),
    }
}

/// Gives `actor` every role `properties` list.
pub async fn assign(
    identity: &dyn IdentityBackend,
    acting: &Acting,
    actor: &Actor,
    properties: &Map<String, Value>,
) -> Result<(), ResourceFailure> {
    for wanted in wanted(properties)? {
        identity.grant(acting, &grant_of(actor, &wanted)).await?;
    }
    Ok(())
}

/// Moves `actor`'s roles from what `old` listed to what `new` lists:
/// gives the added first, then takes back the dropped.
pub async fn reassign(
    identity: &dyn IdentityBackend,
    acting: &Acting,
    actor: &Actor,
    old: &Map<String, Value>,
    new: &Map<String, Value>,
) -> Result<(), ResourceFailure> {
    let before = wanted(old)?;
    let after = wanted(new)?;
    for added in after.difference(&before) {
        identity.grant(acting, &grant_of(actor, added)).await?;
    }
    for dropped in before.difference(&after) {
        identity.revoke(acting, &grant_of(actor, dropped)).await?;
    }
    Ok(())
}

/// Takes back every role `properties` list (an entry that no longer
/// resolves is taken back).
pub async fn unassign(
    identity: &dyn IdentityBackend,
    acting: &Acting,
    actor: &Actor,
    properties: &Map<String, Value>,
) -> Result<(), ResourceFailure> {
    for wanted in wanted(properties)? {
        identity.revoke(acting, &grant_of(actor, &wanted)).await?;
    }
    Ok(())
}

/// The properties a row recorded.
pub fn recorded(current: &Resource) -> Map<String, Value> {
    current.properties.as_object().cloned().unwrap_or_default()
}

/// `OS::Keystone::UserRoleAssignment` or `GroupRoleAssignment`: the roles
/// of one user or group. Its physical id is the user's (group's) id.
pub struct AssignmentResource {
    schema: ResourceTypeSchema,
    identity: Arc<dyn IdentityBackend>,
    /// `user` or `group`.
    kind: Kind,
}

/// Private-data key: the id of the user (group) given the roles.
const ACTOR_ID: &str = "actor_id";

impl AssignmentResource {
    pub fn user(identity: Arc<dyn IdentityBackend>) -> AssignmentResource {
        AssignmentResource {
            schema: user_schema(),
            identity,
            kind: Kind::User,
        }
    }

    pub fn group(identity: Arc<dyn IdentityBackend>) -> AssignmentResource {
        AssignmentResource {
            schema: group_schema(),
            identity,
            kind: Kind::Group,
        }
    }

    fn actor(&self, id: &str) -> Actor {
        actor_of(self.kind, id)
    }

    /// The user (group) the properties name, by id.
    async fn actor_of(
        &self,
        acting: &Acting,
        properties: &Map<String, Value>,
    ) -> Result<Actor, ResourceFailure> {
        let key = self.kind.member();
        let named = text(properties, key)
            .ok_or_else(|| ResourceFailure::new(format!("Property {key} not assigned")))?;
        let id = self.identity.id_of(acting, self.kind, &named).await?;
        Ok(self.actor(&id))
    }

    fn outcome(acting: &Acting, actor: &Actor) -> ResourceOutcome {
        let id = match actor {
            Actor::User(id) | Actor::Group(id) => id.clone(),
        };
        let mut extra = Map::new();
        extra.insert(ACTOR_ID.to_owned(), json!(id));
        ResourceOutcome {
            physical_id: id,
            attributes: Map::new(),
            data: acting.record(extra),
        }
    }
}

fn assignment_schema(
    type_name: &'static str,
    description: &'static str,
    actor: PropertySchema,
) -> ResourceTypeSchema {
    ResourceTypeSchema {
        type_name,
        description,
        properties: vec![actor, roles_property()],
        attributes: Vec::new(),
        accepts_any_properties: false,
        accepts_any_attributes: false,
    }
}

pub fn user_schema() -> ResourceTypeSchema {
    assignment_schema(
        "OS::Keystone::UserRoleAssignment",
        "Roles given to a Keystone user on projects or domains.",
        PropertySchema::new("user", PropertyType::String, "Name or id of keystone user.")
            .required()
            .update_allowed(),
    )
}

pub fn group_schema() -> ResourceTypeSchema {
    assignment_schema(
        "OS::Keystone::GroupRoleAssignment",
        "Roles given to a Keystone group on projects or domains.",
        PropertySchema::new(
            "group",
            PropertyType::String,
            "Name or id of keystone group.",
        )
        .required()
        .update_allowed(),
    )
}

#[async_trait]
impl ResourceType for AssignmentResource {
    fn schema(&self) -> &ResourceTypeSchema {
        &self.schema
    }

    fn refuse_unhonoured(&self, properties: &Map<String, Value>) -> Result<(), String> {
        check_roles(properties)?;
        self.identity.refuse_unhonoured(Kind::Role, properties)
    }

    async fn create(&self, request: &ResourceRequest) -> Result<ResourceOutcome, ResourceFailure> {
        let acting = Acting::of_request(request);
        let actor = self.actor_of(&acting, &request.properties).await?;
        assign(&*self.identity, &acting, &actor, &request.properties).await?;
        Ok(Self::outcome(&acting, &actor))
    }

    async fn update(
        &self,
        request: &ResourceRequest,
        current: &Resource,
    ) -> Result<ResourceOutcome, ResourceFailure> {
        let acting = Acting::of_request(request);
        let actor = self.actor_of(&acting, &request.properties).await?;
        let old = recorded(current);
        match current.data[ACTOR_ID].as_str() {
            Some(old_id) if self.actor(old_id) != actor => {
                unassign(&*self.identity, &acting, &self.actor(old_id), &old).await?;
                assign(&*self.identity, &acting, &actor, &request.properties).await?;
            }
            _ => {
                reassign(&*self.identity, &acting, &actor, &old, &request.properties).await?;
            }
        }
        Ok(Self::outcome(&acting, &actor))
    }

    async fn delete(&self, current: &Resource) -> Result<(), ResourceFailure> {
        let Some(actor_id) = current.data[ACTOR_ID].as_str() else {
            // Never made: nothing was given.
            return Ok(());
        };
        let acting = Acting::of_resource(current)?;
        unassign(
            &*self.identity,
            &acting,
            &self.actor(actor_id),
            &recorded(current),
        )
        .await
    }

    /// The user (group) is still there.
    async fn check(&self, current: &Resource) -> Result<(), ResourceFailure> {
        let acting = Acting::of_resource(current)?;
        let actor_id = current.data[ACTOR_ID].as_str().unwrap_or_default();
        match self.identity.show(&acting, self.kind, actor_id).await? {
            Some(_) => Ok(()),
            None => Err(ResourceFailure::new(format!(
                "The {} {actor_id} could not be found.",
                self.kind.member()
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(roles: Value) -> Result<(), String> {
        check_roles(json!({ "roles": roles }).as_object().expect("a map"))
    }

    #[test]
    fn each_entry_names_a_role_and_one_place() {
        assert!(check(json!([{"role": "member", "project": "demo"}])).is_ok());
        assert!(check(json!([{"role": "admin", "domain": "default"}])).is_ok());
        assert_eq!(
            check(json!([{"role": "member", "project": "a", "domain": "b"}])).unwrap_err(),
            "Cannot define the following properties at the same time: project, domain"
        );
        assert_eq!(
            check(json!([{"role": "member"}])).unwrap_err(),
            "Either project or domain must be specified for role member"
        );
        assert_eq!(
            check(json!([{"project": "demo"}])).unwrap_err(),
            "roles: Property role not assigned"
        );
        assert_eq!(
            check(json!([{"role": "member", "project": "demo", "tenant": "x"}])).unwrap_err(),
            "roles: Unknown Property tenant"
        );
        // Functions are resolved later.
        assert!(check(json!([{"get_param": "roles"}])).is_ok());
    }

    #[test]
    fn an_update_gives_what_is_added_and_takes_back_what_is_dropped() {
        let old = json!({"roles": [
            {"role": "member", "project": "a"},
            {"role": "reader", "project": "b"},
        ]});
        let new = json!({"roles": [
            {"role": "member", "project": "a"},
            {"role": "admin", "domain": "default"},
        ]});
        let before = wanted(old.as_object().expect("map")).expect("valid");
        let after = wanted(new.as_object().expect("map")).expect("valid");
        let added: Vec<_> = after.difference(&before).collect();
        let dropped: Vec<_> = before.difference(&after).collect();
        assert_eq!(added.len(), 1);
        assert_eq!(added[0].role, "admin");
        assert_eq!(added[0].target(), Target::Domain("default".into()));
        assert_eq!(dropped.len(), 1);
        assert_eq!(dropped[0].target(), Target::Project("b".into()));
    }
}
