//! `OS::Keystone::Project`, `User`, `Role` and `Group`: one identity object
//! each, its id the physical id. Every property may change in place, as in
//! Heat (a project's `parent` excepted: Keystone cannot move a project).
//!
//! - An object without `name` is named Heat's physical resource name, and
//!   keeps that name across updates.
//! - An update sends only what changed (a user's unchanged password is not
//!   set again: setting it refuses the user's tokens in the built-in
//!   identity).
//! - A user's `groups` and a user's or group's `roles` are kept as the
//!   lists say: an update adds and takes away the difference; a delete
//!   takes away every role the list gave (the user's memberships go with
//!   the user).
//! - Deletes of what is gone succeed; `check` reads the object.

use std::collections::BTreeSet;
use std::sync::Arc;

use async_trait::async_trait;
use serde_json::{Map, Value, json};

use super::assignments::{self, recorded};
use super::{Acting, Actor, Fields, IdentityBackend, Kind, actor_of, text, texts};
use crate::domain::Resource;
use crate::resources::{
    AttributeSchema, PropertySchema, PropertyType, ResourceFailure, ResourceOutcome,
    ResourceRequest, ResourceType, ResourceTypeSchema,
};

/// One of the four object types.
pub struct ObjectResource {
    schema: ResourceTypeSchema,
    identity: Arc<dyn IdentityBackend>,
    kind: Kind,
}

impl ObjectResource {
    pub fn new(kind: Kind, identity: Arc<dyn IdentityBackend>) -> ObjectResource {
        ObjectResource {
            schema: schema(kind),
            identity,
            kind,
        }
    }

    fn has(&self, property: &str) -> bool {
        self.schema.property(property).is_some()
    }

    /// The fields `properties` set (all of them, for a create).
    fn fields(&self, properties: &Map<String, Value>, name: String) -> Fields {
        let described = |key: &str| {
            properties
                .get(key)
                .and_then(Value::as_str)
                .map(str::to_owned)
        };
        Fields {
            name: Some(name),
            description: self
                .has("description")
                .then(|| described("description"))
                .flatten(),
            enabled: properties.get("enabled").and_then(Value::as_bool),
            email: text(properties, "email"),
            password: text(properties, "password"),
            default_project: text(properties, "default_project"),
            domain: text(properties, "domain"),
            parent: text(properties, "parent"),
            tags: texts(properties, "tags"),
        }
    }

    /// The fields that differ between `old` and `new` (an update sends
    /// those alone).
    fn changed(&self, old: &Map<String, Value>, new: &Map<String, Value>, name: String) -> Fields {
        let differs = |key: &str| old.get(key) != new.get(key);
        let all = self.fields(new, name);
        Fields {
            name: differs("name").then_some(all.name).flatten(),
            description: differs("description").then_some(all.description).flatten(),
            enabled: differs("enabled").then_some(all.enabled).flatten(),
            email: differs("email").then_some(all.email).flatten(),
            password: differs("password").then_some(all.password).flatten(),
            default_project: differs("default_project")
                .then_some(all.default_project)
                .flatten(),
            domain: differs("domain").then_some(all.domain).flatten(),
            parent: None,
            tags: differs("tags").then(|| all.tags.unwrap_or_default()),
        }
    }

    fn actor(&self, id: &str) -> Actor {
        actor_of(self.kind, id)
    }

    /// Adds a user to the groups `names` name.
    async fn join(
        &self,
        acting: &Acting,
        user_id: &str,
        names: impl IntoIterator<Item = &String>,
    ) -> Result<(), ResourceFailure> {
        for name in names {
            let group_id = self.identity.id_of(acting, Kind::Group, name).await?;
            self.identity.add_member(acting, &group_id, user_id).await?;
        }
        Ok(())
    }

    /// Takes a user out of the groups `names` name (a group gone is left).
    async fn leave(
        &self,
        acting: &Acting,
        user_id: &str,
        names: impl IntoIterator<Item = &String>,
    ) -> Result<(), ResourceFailure> {
        for name in names {
            if let Some(group_id) = self.identity.find(acting, Kind::Group, name).await? {
                self.identity
                    .remove_member(acting, &group_id, user_id)
                    .await?;
            }
        }
        Ok(())
    }

    fn outcome(acting: &Acting, object: Value) -> Result<ResourceOutcome, ResourceFailure> {
        let Value::Object(attributes) = object else {
            return Err(ResourceFailure::new(
                "the identity answered without the object".to_owned(),
            ));
        };
        let id = attributes
            .get("id")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        Ok(ResourceOutcome {
            physical_id: id,
            attributes,
            data: acting.record(Map::new()),
        })
    }
}

#[async_trait]
impl ResourceType for ObjectResource {
    fn schema(&self) -> &ResourceTypeSchema {
        &self.schema
    }

    fn refuse_unhonoured(&self, properties: &Map<String, Value>) -> Result<(), String> {
        assignments::check_roles(properties)?;
        self.identity.refuse_unhonoured(self.kind, properties)
    }

    async fn create(&self, request: &ResourceRequest) -> Result<ResourceOutcome, ResourceFailure> {
        let acting = Acting::of_request(request);
        let name = super::name_of(&request.properties, || request.physical_resource_name());
        let fields = self.fields(&request.properties, name);
        let object = self.identity.create(&acting, self.kind, &fields).await?;
        let outcome = Self::outcome(&acting, object)?;
        if let Some(groups) = texts(&request.properties, "groups") {
            self.join(&acting, &outcome.physical_id, &groups).await?;
        }
        if self.has("roles") {
            assignments::assign(
                &*self.identity,
                &acting,
                &self.actor(&outcome.physical_id),
                &request.properties,
            )
            .await?;
        }
        Ok(outcome)
    }

    async fn update(
        &self,
        request: &ResourceRequest,
        current: &Resource,
    ) -> Result<ResourceOutcome, ResourceFailure> {
        let acting = Acting::of_request(request);
        let id = current
            .physical_id
            .clone()
            .filter(|id| !id.is_empty())
            .ok_or_else(|| ResourceFailure::new(format!("{} was never made", current.name)))?;
        let old = recorded(current);
        let name = super::name_of(&request.properties, || {
            current.attributes["name"]
                .as_str()
                .map_or_else(|| request.physical_resource_name(), str::to_owned)
        });
        let fields = self.changed(&old, &request.properties, name);
        let object = if fields == Fields::default() {
            self.identity
                .show(&acting, self.kind, &id)
                .await?
                .ok_or_else(|| {
                    ResourceFailure::new(format!(
                        "The {} {id} could not be found.",
                        self.kind.member()
                    ))
                })?
        } else {
            self.identity
                .update(&acting, self.kind, &id, &fields)
                .await?
        };
        if self.has("groups") {
            let before: BTreeSet<String> = texts(&old, "groups")
                .unwrap_or_default()
                .into_iter()
                .collect();
            let after: BTreeSet<String> = texts(&request.properties, "groups")
                .unwrap_or_default()
                .into_iter()
                .collect();
            self.join(&acting, &id, after.difference(&before)).await?;
            self.leave(&acting, &id, before.difference(&after)).await?;
        }
        if self.has("roles") {
            assignments::reassign(
                &*self.identity,
                &acting,
                &self.actor(&id),
                &old,
                &request.properties,
            )
            .await?;
        }
        Self::outcome(&acting, object)
    }

    async fn delete(&self, current: &Resource) -> Result<(), ResourceFailure> {
        let Some(id) = current.physical_id.as_deref().filter(|id| !id.is_empty()) else {
            return Ok(());
        };
        let acting = Acting::of_resource(current)?;
        if self.has("roles") {
            assignments::unassign(
                &*self.identity,
                &acting,
                &self.actor(id),
                &recorded(current),
            )
            .await?;
        }
        self.identity.delete(&acting, self.kind, id).await
    }

    async fn check(&self, current: &Resource) -> Result<(), ResourceFailure> {
        let id = current.physical_id.as_deref().unwrap_or_default();
        let acting = Acting::of_resource(current)?;
        match self.identity.show(&acting, self.kind, id).await? {
            Some(_) => Ok(()),
            None => Err(ResourceFailure::new(format!(
                "The {} {id} could not be found.",
                self.kind.member()
            ))),
        }
    }
}

fn domain_property(what: &'static str) -> PropertySchema {
    PropertySchema::new("domain", PropertyType::String, what)
        .default(json!("default"))
        .update_allowed()
}

fn attribute(name: &'static str, description: &'static str) -> AttributeSchema {
    AttributeSchema { name, description }
}

/// The schema of `kind`'s type (Heat's properties and attributes).
pub fn schema(kind: Kind) -> ResourceTypeSchema {
    let name = |what| PropertySchema::new("name", PropertyType::String, what).update_allowed();
    let description = |what| {
        PropertySchema::new("description", PropertyType::String, what)
            .default(json!(""))
            .update_allowed()
    };
    let enabled = |what| {
        PropertySchema::new("enabled", PropertyType::Boolean, what)
            .default(json!(true))
            .update_allowed()
    };
    let (type_name, type_description, properties, attributes) = match kind {
        Kind::Project => (
            "OS::Keystone::Project",
            "A Keystone project.",
            vec![
                name("Name of keystone project."),
                domain_property("Name or id of keystone domain."),
                description("Description of keystone project."),
                enabled("This project is enabled or disabled."),
                PropertySchema::new(
                    "parent",
                    PropertyType::String,
                    "The name or ID of parent of this keystone project in hierarchy.",
                ),
                PropertySchema::new(
                    "tags",
                    PropertyType::List,
                    "A list of tags for labeling and sorting projects.",
                )
                .default(json!([]))
                .update_allowed(),
            ],
            vec![
                attribute("name", "Project name."),
                attribute("domain_id", "Domain id for project."),
                attribute("enabled", "Flag of enable project."),
                attribute("description", "Description of project."),
                attribute("parent_id", "Parent project id."),
                attribute(
                    "is_domain",
                    "Indicates whether the project also acts as a domain.",
                ),
            ],
        ),
        Kind::User => (
            "OS::Keystone::User",
            "A Keystone user, its groups and its roles.",
            vec![
                name("Name of keystone user."),
                domain_property("Name of keystone domain."),
                description("Description of keystone user."),
                enabled("Keystone user is enabled or disabled."),
                PropertySchema::new(
                    "email",
                    PropertyType::String,
                    "Email address of keystone user.",
                )
                .update_allowed(),
                PropertySchema::new(
                    "password",
                    PropertyType::String,
                    "Password of keystone user.",
                )
                .update_allowed(),
                PropertySchema::new(
                    "default_project",
                    PropertyType::String,
                    "Name or ID of default project of keystone user.",
                )
                .update_allowed(),
                PropertySchema::new("groups", PropertyType::List, "Keystone user groups.")
                    .update_allowed(),
                assignments::roles_property(),
            ],
            vec![
                attribute("name", "User name."),
                attribute("domain_id", "User's domain id."),
                attribute("enabled", "Flag of enable user."),
                attribute("password_expires_at", "Show user password expiration time."),
                attribute("default_project_id", "Default project id for user."),
            ],
        ),
        Kind::Role => (
            "OS::Keystone::Role",
            "A Keystone role.",
            vec![
                name("Name of keystone role."),
                PropertySchema::new(
                    "domain",
                    PropertyType::String,
                    "Name or id of keystone domain (a domain-specific role).",
                ),
            ],
            vec![
                attribute("name", "Role name."),
                attribute("domain_id", "Domain id of a domain-specific role."),
            ],
        ),
        Kind::Group | Kind::Domain => (
            "OS::Keystone::Group",
            "A Keystone group and its roles.",
            vec![
                name("Name of keystone group."),
                domain_property("Name or id of keystone domain."),
                description("Description of keystone group."),
                assignments::roles_property(),
            ],
            vec![
                attribute("name", "Group name."),
                attribute("domain_id", "Group's domain id."),
                attribute("description", "Group description."),
            ],
        ),
    };
    ResourceTypeSchema {
        type_name,
        description: type_description,
        properties,
        attributes,
        accepts_any_properties: false,
        accepts_any_attributes: false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Nothing;

    #[async_trait]
    impl IdentityBackend for Nothing {
        fn refuse_unhonoured(&self, _: Kind, _: &Map<String, Value>) -> Result<(), String> {
            Ok(())
        }
        async fn create(&self, _: &Acting, _: Kind, _: &Fields) -> Result<Value, ResourceFailure> {
            Err(ResourceFailure::new("unused"))
        }
        async fn update(
            &self,
            _: &Acting,
            _: Kind,
            _: &str,
            _: &Fields,
        ) -> Result<Value, ResourceFailure> {
            Err(ResourceFailure::new("unused"))
        }
        async fn show(
            &self,
            _: &Acting,
            _: Kind,
            _: &str,
        ) -> Result<Option<Value>, ResourceFailure> {
            Ok(None)
        }
        async fn delete(&self, _: &Acting, _: Kind, _: &str) -> Result<(), ResourceFailure> {
            Ok(())
        }
        async fn find(
            &self,
            _: &Acting,
            _: Kind,
            _: &str,
        ) -> Result<Option<String>, ResourceFailure> {
            Err(ResourceFailure::new("unused"))
        }
        async fn grant(&self, _: &Acting, _: &super::super::Grant) -> Result<(), ResourceFailure> {
            Ok(())
        }
        async fn revoke(&self, _: &Acting, _: &super::super::Grant) -> Result<(), ResourceFailure> {
            Ok(())
        }
        async fn add_member(&self, _: &Acting, _: &str, _: &str) -> Result<(), ResourceFailure> {
            Ok(())
        }
        async fn remove_member(&self, _: &Acting, _: &str, _: &str) -> Result<(), ResourceFailure> {
            Ok(())
        }
    }

    fn map(value: Value) -> Map<String, Value> {
        value.as_object().cloned().expect("a map")
    }

    #[test]
    fn an_update_sends_only_what_changed() {
        let user = ObjectResource::new(Kind::User, Arc::new(Nothing));
        let old =
            map(json!({"name": "u", "password": "secret-one", "email": "a@x", "enabled": true}));
        let new =
            map(json!({"name": "u", "password": "secret-one", "email": "b@x", "enabled": false}));
        let fields = user.changed(&old, &new, "u".into());
        assert_eq!(
            fields,
            Fields {
                email: Some("b@x".into()),
                enabled: Some(false),
                ..Fields::default()
            }
        );
        assert_eq!(user.changed(&old, &old, "u".into()), Fields::default());
    }

    #[test]
    fn a_create_sends_every_field_with_the_name_given_or_made() {
        let project = ObjectResource::new(Kind::Project, Arc::new(Nothing));
        let fields = project.fields(
            &map(json!({"description": "", "enabled": false, "tags": ["a"]})),
            "stack-project-abc".into(),
        );
        assert_eq!(fields.name.as_deref(), Some("stack-project-abc"));
        assert_eq!(fields.description.as_deref(), Some(""));
        assert_eq!(fields.enabled, Some(false));
        assert_eq!(fields.tags, Some(vec!["a".to_owned()]));
    }
}
