//! An external Keystone as the Keystone types' backend: its v3 API,
//! reached through the openstack backend's catalog and called through the
//! stack's trust — as the stack's owner, with the roles the trust
//! delegates, as Heat does. Names of domains, projects, roles, groups and
//! users are resolved as Heat's keystone client plugin resolves them: an
//! id first, then a name (several of one name is a failure asking for an
//! id).

use std::sync::Arc;

use ember_openstack::keystone::Keystone;
use serde_json::{Map, Value, json};

use super::{Acting, Fields, Grant, IdentityBackend, Kind, Target};
use crate::cloud::OpenStackCloud;
use crate::resources::ResourceFailure;

pub struct CloudIdentity {
    cloud: Arc<OpenStackCloud>,
}

impl CloudIdentity {
    pub fn new(cloud: Arc<OpenStackCloud>) -> CloudIdentity {
        CloudIdentity { cloud }
    }

    async fn keystone(&self, acting: &Acting) -> Result<Keystone, ResourceFailure> {
        let session = self.cloud.stack_session(acting.stack_id).await?;
        Ok(Keystone::new(&session))
    }

    /// The id of the one object `name_or_id` names, `None` when none.
    async fn lookup(
        keystone: &Keystone,
        kind: Kind,
        name_or_id: &str,
    ) -> Result<Option<String>, ResourceFailure> {
        let mut ids = keystone.ids_of(kind, name_or_id).await.map_err(failure)?;
        match ids.len() {
            0 => Ok(None),
            1 => Ok(Some(ids.remove(0))),
            _ => Err(ResourceFailure::new(format!(
                "Multiple {} matches found for '{name_or_id}', use an ID to be more specific.",
                kind.member()
            ))),
        }
    }

    async fn resolve(
        keystone: &Keystone,
        kind: Kind,
        name_or_id: &str,
    ) -> Result<String, ResourceFailure> {
        Self::lookup(keystone, kind, name_or_id)
            .await?
            .ok_or_else(|| {
                ResourceFailure::new(format!(
                    "The {} ({name_or_id}) could not be found.",
                    kind.member()
                ))
            })
    }

    /// `fields` as Keystone's request body, references resolved to ids.
    async fn body(
        keystone: &Keystone,
        kind: Kind,
        fields: &Fields,
    ) -> Result<Value, ResourceFailure> {
        let mut body = Map::new();
        let mut put = |key: &str, value: Option<Value>| {
            if let Some(value) = value {
                body.insert(key.to_owned(), value);
            }
        };
        put("name", fields.name.clone().map(Value::String));
        if kind != Kind::Role {
            put("description", fields.description.clone().map(Value::String));
        }
        put("enabled", fields.enabled.map(Value::Bool));
        put("email", fields.email.clone().map(Value::String));
        put("password", fields.password.clone().map(Value::String));
        put("tags", fields.tags.clone().map(|tags| json!(tags)));
        if let Some(domain) = &fields.domain {
            let id = Self::resolve(keystone, Kind::Domain, domain).await?;
            body.insert("domain_id".to_owned(), Value::String(id));
        }
        if let Some(project) = &fields.default_project {
            let id = Self::resolve(keystone, Kind::Project, project).await?;
            body.insert("default_project_id".to_owned(), Value::String(id));
        }
        if let Some(parent) = &fields.parent {
            let id = Self::resolve(keystone, Kind::Project, parent).await?;
            body.insert("parent_id".to_owned(), Value::String(id));
        }
        Ok(Value::Object(body))
    }

    /// The grant's role and target by id; `None` when either is gone (a
    /// revoke's: what is gone took its assignments with it).
    async fn grant_ids(
        keystone: &Keystone,
        grant: &Grant,
    ) -> Result<Option<(String, Target)>, ResourceFailure> {
        let Some(role) = Self::lookup(keystone, Kind::Role, &grant.role).await? else {
            return Ok(None);
        };
        let target = match &grant.target {
            Target::Project(project) => Self::lookup(keystone, Kind::Project, project)
                .await?
                .map(Target::Project),
            Target::Domain(domain) => Self::lookup(keystone, Kind::Domain, domain)
                .await?
                .map(Target::Domain),
        };
        Ok(target.map(|target| (role, target)))
    }
}

fn failure(error: ember_openstack::Error) -> ResourceFailure {
    ResourceFailure::new(error.to_string())
}

#[tonic::async_trait]
impl IdentityBackend for CloudIdentity {
    /// Keystone honours every property the types have.
    fn refuse_unhonoured(&self, kind: Kind, properties: &Map<String, Value>) -> Result<(), String> {
        let _ = (kind, properties);
        Ok(())
    }

    async fn create(
        &self,
        acting: &Acting,
        kind: Kind,
        fields: &Fields,
    ) -> Result<Value, ResourceFailure> {
        let keystone = self.keystone(acting).await?;
        let body = Self::body(&keystone, kind, fields).await?;
        keystone.create(kind, body).await.map_err(failure)
    }

    async fn update(
        &self,
        acting: &Acting,
        kind: Kind,
        id: &str,
        fields: &Fields,
    ) -> Result<Value, ResourceFailure> {
        let keystone = self.keystone(acting).await?;
        let body = Self::body(&keystone, kind, fields).await?;
        keystone.update(kind, id, body).await.map_err(failure)
    }

    async fn show(
        &self,
        acting: &Acting,
        kind: Kind,
        id: &str,
    ) -> Result<Option<Value>, ResourceFailure> {
        let keystone = self.keystone(acting).await?;
        keystone.get(kind, id).await.map_err(failure)
    }

    async fn delete(&self, acting: &Acting, kind: Kind, id: &str) -> Result<(), ResourceFailure> {
        let keystone = self.keystone(acting).await?;
        keystone.delete(kind, id).await.map_err(failure)
    }

    async fn find(
        &self,
        acting: &Acting,
        kind: Kind,
        name_or_id: &str,
    ) -> Result<Option<String>, ResourceFailure> {
        let keystone = self.keystone(acting).await?;
        Self::lookup(&keystone, kind, name_or_id).await
    }

    async fn grant(&self, acting: &Acting, grant: &Grant) -> Result<(), ResourceFailure> {
        let keystone = self.keystone(acting).await?;
        let role = Self::resolve(&keystone, Kind::Role, &grant.role).await?;
        let target = match &grant.target {
            Target::Project(project) => {
                Target::Project(Self::resolve(&keystone, Kind::Project, project).await?)
            }
            Target::Domain(domain) => {
                Target::Domain(Self::resolve(&keystone, Kind::Domain, domain).await?)
            }
        };
        keystone
            .grant(&target, &grant.actor, &role)
            .await
            .map_err(failure)
    }

    async fn revoke(&self, acting: &Acting, grant: &Grant) -> Result<(), ResourceFailure> {
        let keystone = self.keystone(acting).await?;
        let Some((role, target)) = Self::grant_ids(&keystone, grant).await? else {
            return Ok(());
        };
        keystone
            .revoke(&target, &grant.actor, &role)
            .await
            .map_err(failure)
    }

    async fn add_member(
        &self,
        acting: &Acting,
        group_id: &str,
        user_id: &str,
    ) -> Result<(), ResourceFailure> {
        let keystone = self.keystone(acting).await?;
        keystone
            .add_to_group(group_id, user_id)
            .await
            .map_err(failure)
    }

    async fn remove_member(
        &self,
        acting: &Acting,
        group_id: &str,
        user_id: &str,
    ) -> Result<(), ResourceFailure> {
        let keystone = self.keystone(acting).await?;
        keystone
            .remove_from_group(group_id, user_id)
            .await
            .map_err(failure)
    }
}
