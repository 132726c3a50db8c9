//! The lifecycle every taggable Neutron object shares (networks, subnets,
//! ports, routers, security groups, floating IPs): made once per row,
//! found again by its marker tag, waited for as Heat waits, changed in
//! place, checked, and deleted until Neutron no longer has it.
//!
//! Why a create cannot make two: before making anything it lists the
//! objects carrying the row's marker ([`Cloud::marker`]) and adopts what
//! it finds — a create retried, or taken over by another engine after a
//! crash. Neutron takes no tags in a create body, so the marker is set by
//! a second call; an object made by an attempt that died between the two
//! is found by its name instead when the create runs again, if Ember named
//! it (the name derives from the row: [`physical_name`]). A tag that
//! cannot be set makes the create delete what it just made, so a failed
//! create leaves nothing unmarked behind. What stays open: an engine dying
//! in that one round trip, its row then deleted rather than created again
//! (a delete knows the row, not the stack's name), or the template naming
//! the object itself — the object is left, untagged.

use std::time::Duration;

use async_trait::async_trait;
use ember_openstack::neutron::{Kind, Neutron, id_of};
use serde_json::{Map, Value};

use super::{Change, Settling, TaggedObject, is_built, neutron_for, physical_name, present};
use crate::domain::{Resource, StackAction};
use crate::resources::openstack::{Cloud, failure, physical_id};
use crate::resources::{
    ResourceFailure, ResourceOutcome, ResourceRequest, ResourceType, ResourceTypeSchema,
};

/// How many times a delete Neutron refuses with 409 (in use: a port still
/// on a network a moment after its server went) is tried again — Heat's
/// `action_retry_limit` for deletes that conflict.
const DELETE_CONFLICT_RETRIES: u32 = 5;

/// The first pause before a conflicting delete is tried again; it doubles
/// each time.
const DELETE_CONFLICT_PAUSE: Duration = Duration::from_secs(1);

/// A resource type making one taggable Neutron object, `T` deciding what.
pub struct Tagged<T> {
    cloud: Cloud,
    schema: ResourceTypeSchema,
    object: T,
}

impl<T: TaggedObject> Tagged<T> {
    pub fn new(cloud: &Cloud, object: T) -> Tagged<T> {
        Tagged {
            cloud: cloud.clone(),
            schema: object.schema(),
            object,
        }
    }

    fn kind(&self) -> Kind {
        T::KIND
    }

    /// The tags the object carries: the template's, then the row's marker.
    fn tags(
        &self,
        properties: &Map<String, Value>,
        marker: &str,
    ) -> Result<Vec<String>, ResourceFailure> {
        let mut tags = self.object.user_tags(properties)?;
        tags.retain(|tag| tag != marker);
        tags.push(marker.to_owned());
        Ok(tags)
    }

    /// The name Ember gives the object, when the template gives none.
    fn default_name(&self, request: &ResourceRequest) -> Option<String> {
        let named_by_template = present(&request.properties, "name").is_some()
            && self.schema.property("name").is_some();
        (T::NAMED_BY_DEFAULT && !named_by_template).then(|| physical_name(request, self.kind()))
    }

    /// What an earlier attempt of the row made: the objects carrying its
    /// marker, else (with `default_name`) the one Ember named but did not
    /// get to tag.
    async fn made_before(
        &self,
        neutron: &Neutron,
        marker: &str,
        default_name: Option<&str>,
    ) -> Result<Vec<Value>, ResourceFailure> {
        let marked = neutron
            .list(self.kind(), &[("tags", marker)])
            .await
            .map_err(failure)?;
        if !marked.is_empty() {
            return Ok(marked);
        }
        let Some(name) = default_name else {
            return Ok(Vec::new());
        };
        neutron
            .list(self.kind(), &[("name", name)])
            .await
            .map_err(failure)
    }

    /// Makes the object, tags it, and deletes it again if the tag cannot
    /// be set (an unmarked object could not be found by a later delete).
    async fn make(
        &self,
        neutron: &Neutron,
        request: &ResourceRequest,
        tags: &[String],
    ) -> Result<Value, ResourceFailure> {
        let name = physical_name(request, self.kind());
        let body = self.object.create_body(neutron, request, &name).await?;
        let mut made = neutron
            .create(self.kind(), body, &[])
            .await
            .map_err(failure)?;
        let id = id_of(&made).map_err(failure)?;
        if let Err(error) = neutron.set_tags(self.kind(), &id, tags).await {
            tracing::warn!(
                stack_id = %request.stack_id,
                resource = %request.resource_name,
                %id,
                %error,
                "the marker could not be set: deleting what was just made"
            );
            let _ = neutron.delete(self.kind(), &id).await;
            return Err(failure(error));
        }
        made["tags"] = Value::from(tags.to_vec());
        Ok(made)
    }

    /// Sets `tags` unless the object carries them already.
    async fn ensure_tags(
        &self,
        neutron: &Neutron,
        object: &Value,
        tags: &[String],
    ) -> Result<(), ResourceFailure> {
        let mut carried: Vec<&str> = object
            .get("tags")
            .and_then(Value::as_array)
            .map(|tags| tags.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        let mut wanted: Vec<&str> = tags.iter().map(String::as_str).collect();
        carried.sort_unstable();
        wanted.sort_unstable();
        if carried == wanted {
            return Ok(());
        }
        let id = id_of(object).map_err(failure)?;
        neutron
            .set_tags(self.kind(), &id, tags)
            .await
            .map_err(failure)
    }

    /// The object once settled: built (or failed) when the type waits,
    /// else as Neutron shows it now. Gone meanwhile is a failure.
    async fn settled(
        &self,
        neutron: &Neutron,
        id: &str,
        settling: Settling,
    ) -> Result<Value, ResourceFailure> {
        let kind = self.kind();
        let what = format!("{} {id} to be built", kind.noun());
        Cloud::wait_for(&what, || async {
            let object = neutron
                .get(kind, id)
                .await
                .map_err(failure)?
                .ok_or_else(|| {
                    ResourceFailure::new(format!("the {} {id} disappeared", kind.noun()))
                })?;
            match settling {
                Settling::AsAnswered => Ok(Some(object)),
                Settling::UntilBuilt => Ok(is_built(&object)?.then_some(object)),
            }
        })
        .await
    }

    async fn outcome(
        &self,
        neutron: &Neutron,
        object: Value,
        data: Value,
    ) -> Result<ResourceOutcome, ResourceFailure> {
        let physical_id = id_of(&object).map_err(failure)?;
        Ok(ResourceOutcome {
            physical_id,
            attributes: self.object.attributes(neutron, object).await?,
            data,
        })
    }

    /// Deletes the object and waits until Neutron no longer has it.
    async fn remove(&self, neutron: &Neutron, id: &str) -> Result<(), ResourceFailure> {
        delete_until_gone(neutron, self.kind(), id).await
    }
}

/// Deletes `id` (gone already is deleted), trying again while Neutron
/// answers 409 (still in use), then waits until it is gone.
pub async fn delete_until_gone(
    neutron: &Neutron,
    kind: Kind,
    id: &str,
) -> Result<(), ResourceFailure> {
    let mut pause = DELETE_CONFLICT_PAUSE;
    let mut retries = 0;
    loop {
        match neutron.delete(kind, id).await {
            Ok(()) => break,
            Err(error) if error.is_conflict() && retries < DELETE_CONFLICT_RETRIES => {
                retries += 1;
                tokio::time::sleep(pause).await;
                pause *= 2;
            }
            Err(error) => return Err(failure(error)),
        }
    }
    let what = format!("{} {id} to be deleted", kind.noun());
    Cloud::wait_for(&what, || async {
        let object = neutron.get(kind, id).await.map_err(failure)?;
        Ok(object.is_none().then_some(()))
    })
    .await
}

#[async_trait]
impl<T: TaggedObject> ResourceType for Tagged<T> {
    fn schema(&self) -> &ResourceTypeSchema {
        &self.schema
    }

    /// Finds what an earlier attempt of the row made, else makes it; then
    /// finishes what the type does after (rules), and waits.
    async fn create(&self, request: &ResourceRequest) -> Result<ResourceOutcome, ResourceFailure> {
        super::check_value_specs(&self.schema, &request.properties)?;
        let neutron = neutron_for(&self.cloud, request.stack_id).await?;
        let marker = Cloud::marker(request, self.kind().member());
        let tags = self.tags(&request.properties, &marker)?;
        let default_name = self.default_name(request);
        let found = self
            .made_before(&neutron, &marker, default_name.as_deref())
            .await?;
        let object = match found.into_iter().next() {
            Some(found) => {
                self.ensure_tags(&neutron, &found, &tags).await?;
                found
            }
            None => self.make(&neutron, request, &tags).await?,
        };
        self.object.after_create(&neutron, request, &object).await?;
        let id = id_of(&object).map_err(failure)?;
        let settled = self.settled(&neutron, &id, T::CREATE_SETTLING).await?;
        self.outcome(&neutron, settled, Value::Object(Map::new()))
            .await
    }

    /// Sends what changed (the type's update body), the tags if they
    /// changed, then what the type does after (a security group's rules).
    async fn update(
        &self,
        request: &ResourceRequest,
        current: &Resource,
    ) -> Result<ResourceOutcome, ResourceFailure> {
        let Some(id) = physical_id(current) else {
            return self.create(request).await;
        };
        super::check_value_specs(&self.schema, &request.properties)?;
        let neutron = neutron_for(&self.cloud, request.stack_id).await?;
        let before = current.properties.as_object().cloned().unwrap_or_default();
        let change = Change {
            request,
            before: &before,
            id,
        };
        let body = self.object.update_body(&neutron, &change).await?;
        if !body.is_empty() {
            neutron
                .update(self.kind(), id, body)
                .await
                .map_err(failure)?;
        }
        let marker = Cloud::marker(request, self.kind().member());
        if self.object.user_tags(&before)? != self.object.user_tags(&request.properties)? {
            neutron
                .set_tags(self.kind(), id, &self.tags(&request.properties, &marker)?)
                .await
                .map_err(failure)?;
        }
        self.object.after_update(&neutron, &change).await?;
        let settled = self.settled(&neutron, id, T::UPDATE_SETTLING).await?;
        self.outcome(&neutron, settled, current.data.clone()).await
    }

    /// Deletes the object the row recorded — or, with none recorded (a
    /// create that failed or crashed before its id was kept), whatever
    /// carries the row's marker.
    async fn delete(&self, current: &Resource) -> Result<(), ResourceFailure> {
        let neutron = neutron_for(&self.cloud, current.stack_id).await?;
        let ids = match physical_id(current) {
            Some(id) => vec![id.to_owned()],
            None => {
                let marker = Cloud::marker_of(current, self.kind().member());
                self.made_before(&neutron, &marker, None)
                    .await?
                    .iter()
                    .map(id_of)
                    .collect::<Result<Vec<_>, _>>()
                    .map_err(failure)?
            }
        };
        for id in ids {
            self.remove(&neutron, &id).await?;
        }
        Ok(())
    }

    /// Fails when the object is gone or in ERROR.
    async fn check(&self, current: &Resource) -> Result<(), ResourceFailure> {
        let Some(id) = physical_id(current) else {
            return Err(ResourceFailure::new(format!(
                "no {} was created",
                self.kind().noun()
            )));
        };
        let neutron = neutron_for(&self.cloud, current.stack_id).await?;
        let object = neutron
            .get(self.kind(), id)
            .await
            .map_err(failure)?
            .ok_or_else(|| {
                ResourceFailure::new(format!("the {} {id} is gone", self.kind().noun()))
            })?;
        match object.get("status").and_then(Value::as_str) {
            Some(status @ ("ERROR" | "DEGRADED")) => Err(ResourceFailure::new(format!(
                "Went to status {status} due to \"Unknown\""
            ))),
            _ => Ok(()),
        }
    }

    /// Every step is taken over: a create finds what an earlier attempt
    /// made by its marker, an update sends the same fields again, a delete
    /// finds the object gone or deletes it, a check only reads.
    fn take_over(&self, _step: StackAction) -> Result<(), String> {
        Ok(())
    }

    fn reference(&self, current: &Resource) -> Value {
        self.object.reference(current)
    }

    async fn prepare_for_replace(&self, current: &Resource) -> Result<(), ResourceFailure> {
        let Some(id) = physical_id(current) else {
            return Ok(());
        };
        let neutron = neutron_for(&self.cloud, current.stack_id).await?;
        self.object.prepare_for_replace(&neutron, id).await
    }

    fn needs_replacement(&self, old: &Map<String, Value>, new: &Map<String, Value>) -> bool {
        self.object.needs_replacement(old, new).unwrap_or_else(|| {
            self.schema.properties.iter().any(|property| {
                !property.update_allowed
                    && present(old, property.name) != present(new, property.name)
            })
        })
    }
}
