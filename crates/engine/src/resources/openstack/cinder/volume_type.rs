//! `OS::Cinder::VolumeType` and `OS::Cinder::EncryptedVolumeType`: a
//! volume type (public, or private to the projects named) with its extra
//! specs, and the encryption a type gives its volumes. Both are an
//! admin's under Cinder's default policy: a user without the right gets
//! Cinder's refusal as the resource's failure. Every property changes in
//! place, as in Heat, except the type an encryption is for.
//!
//! Cinder keeps type names unique, and a type carries no tags; what marks
//! a type as the row's is one extra spec, `ember:resource`, set with the
//! type. Cinder's scheduler ignores extra specs of a scope other than
//! `capabilities`, so it changes nothing about where volumes go; it is
//! kept through metadata updates. A create run again adopts the type of
//! its name that carries the row's marker (and fails, as Cinder does, on
//! one that does not); a delete of a row that recorded no type deletes
//! the type carrying its marker. An encryption belongs to its type: a
//! create run again takes the type's encryption as made.

use std::collections::BTreeMap;

use async_trait::async_trait;
use ember_openstack::cinder::{Cinder, VolumeType, VolumeTypeFields};
use ember_openstack::keystone::Keystone;
use serde_json::{Map, Value, json};

use super::super::heat::changed_properties;
use super::super::{Cloud, failure, physical_id, text};
use super::cinder_for;
use crate::domain::{Resource, StackAction};
use crate::resources::{
    PropertySchema, PropertyType, ResourceFailure, ResourceOutcome, ResourceRequest, ResourceType,
    ResourceTypeSchema,
};

/// The extra spec marking a type as a row's.
pub const MARKER_SPEC: &str = "ember:resource";

/// What the marker derives from.
const TYPE_KIND: &str = "volume type";

pub fn schema() -> ResourceTypeSchema {
    ResourceTypeSchema {
        type_name: "OS::Cinder::VolumeType",
        description: "A Cinder volume type: public, or private to the projects named, with its extra specs (an admin's, under Cinder's default policy).",
        properties: vec![
            PropertySchema::new("name", PropertyType::String, "Name of the volume type.")
                .required()
                .update_allowed(),
            PropertySchema::new(
                "metadata",
                PropertyType::Map,
                "The extra specs key and value pairs of the volume type.",
            )
            .update_allowed(),
            PropertySchema::new(
                "is_public",
                PropertyType::Boolean,
                "Whether the volume type is accessible to the public.",
            )
            .default(json!(true))
            .update_allowed(),
            PropertySchema::new(
                "description",
                PropertyType::String,
                "Description of the volume type.",
            )
            .update_allowed(),
            PropertySchema::new(
                "projects",
                PropertyType::List,
                "Projects (names or ids) to add volume type access to.",
            )
            .default(json!([]))
            .update_allowed(),
        ],
        attributes: Vec::new(),
        accepts_any_properties: false,
        accepts_any_attributes: false,
    }
}

pub fn encrypted_schema() -> ResourceTypeSchema {
    ResourceTypeSchema {
        type_name: "OS::Cinder::EncryptedVolumeType",
        description: "The encryption of a Cinder volume type (an admin's, under Cinder's default policy).",
        properties: vec![
            PropertySchema::new(
                "provider",
                PropertyType::String,
                "The class that provides encryption support. For example, nova.volume.encryptors.luks.LuksEncryptor.",
            )
            .required()
            .update_allowed(),
            PropertySchema::new(
                "control_location",
                PropertyType::String,
                "Notional service where encryption is performed For example, front-end. For Nova.",
            )
            .default(json!("front-end"))
            .allowed_values(vec![json!("front-end"), json!("back-end")])
            .update_allowed(),
            PropertySchema::new(
                "cipher",
                PropertyType::String,
                "The encryption algorithm or mode. For example, aes-xts-plain64.",
            )
            .allowed_values(vec![json!("aes-xts-plain64"), json!("aes-cbc-essiv")])
            .update_allowed(),
            PropertySchema::new(
                "key_size",
                PropertyType::Integer,
                "Size of encryption key, in bits. For example, 128 or 256.",
            )
            .update_allowed(),
            PropertySchema::new(
                "volume_type",
                PropertyType::String,
                "Name or id of volume type (OS::Cinder::VolumeType).",
            )
            .required(),
        ],
        attributes: Vec::new(),
        accepts_any_properties: false,
        accepts_any_attributes: false,
    }
}

/// What a type's properties ask for.
#[derive(Debug, Clone, PartialEq)]
pub struct TypeSpec {
    pub name: String,
    pub description: Option<String>,
    pub is_public: bool,
    pub extra_specs: BTreeMap<String, String>,
    pub projects: Vec<String>,
}

impl TypeSpec {
    /// Reads and checks `properties` (Heat's validation: projects only
    /// for a private type).
    pub fn read(properties: &Map<String, Value>) -> Result<TypeSpec, ResourceFailure> {
        let name = text(properties, "name")
            .filter(|name| !name.is_empty())
            .ok_or_else(|| ResourceFailure::new("Property name not assigned".to_owned()))?;
        let is_public = properties
            .get("is_public")
            .and_then(Value::as_bool)
            .unwrap_or(true);
        let projects: Vec<String> = properties
            .get("projects")
            .and_then(Value::as_array)
            .map(|projects| {
                projects
                    .iter()
                    .filter_map(|project| match project {
                        Value::Null => None,
                        Value::String(text) => Some(text.clone()),
                        other => Some(other.to_string()),
                    })
                    .collect()
            })
            .unwrap_or_default();
        if is_public && !projects.is_empty() {
            return Err(ResourceFailure::new(
                "Can not specify property \"projects\" if the volume type is public.".to_owned(),
            ));
        }
        let mut extra_specs = BTreeMap::new();
        if let Some(metadata) = properties.get("metadata").and_then(Value::as_object) {
            for (key, value) in metadata {
                if key == MARKER_SPEC {
                    return Err(ResourceFailure::new(format!(
                        "metadata: the extra spec {MARKER_SPEC} is Ember's own (it marks the type as the resource's)"
                    )));
                }
                let value = match value {
                    Value::String(text) => text.clone(),
                    other => other.to_string(),
                };
                extra_specs.insert(key.clone(), value);
            }
        }
        Ok(TypeSpec {
            name,
            description: text(properties, "description"),
            is_public,
            extra_specs,
            projects,
        })
    }
}

pub struct VolumeTypeResource {
    schema: ResourceTypeSchema,
    cloud: Cloud,
}

impl VolumeTypeResource {
    pub fn new(cloud: Cloud) -> VolumeTypeResource {
        VolumeTypeResource {
            schema: schema(),
            cloud,
        }
    }

    async fn make(&self, request: &ResourceRequest) -> Result<ResourceOutcome, ResourceFailure> {
        let spec = TypeSpec::read(&request.properties)?;
        let (session, cinder) = cinder_for(&self.cloud, request.stack_id).await?;
        let marker = Cloud::marker(request, TYPE_KIND);
        let made = match marked(&cinder, &marker).await? {
            Some(found) => found,
            None => {
                let mut specs = spec.extra_specs.clone();
                specs.insert(MARKER_SPEC.to_owned(), marker);
                cinder
                    .create_volume_type(
                        &VolumeTypeFields {
                            name: Some(spec.name.clone()),
                            description: spec.description.clone(),
                            is_public: Some(spec.is_public),
                        },
                        &specs,
                    )
                    .await
                    .map_err(failure)?
            }
        };
        let projects = project_ids(&session, &spec.projects).await?;
        if !projects.is_empty() {
            // A create run again finds what the earlier attempt granted.
            let granted = cinder.type_access(&made.id).await.map_err(failure)?;
            for project in projects.iter().filter(|project| !granted.contains(project)) {
                cinder
                    .set_type_access(&made.id, project, true)
                    .await
                    .map_err(failure)?;
            }
        }
        outcome(&cinder, &made.id).await
    }
}

/// The type carrying `marker`, if one does.
async fn marked(cinder: &Cinder, marker: &str) -> Result<Option<VolumeType>, ResourceFailure> {
    Ok(cinder
        .volume_types()
        .await
        .map_err(failure)?
        .into_iter()
        .find(|volume_type| {
            volume_type.extra_specs.get(MARKER_SPEC).map(String::as_str) == Some(marker)
        }))
}

/// Keystone's ids of the projects named (Heat's `keystone.project`).
async fn project_ids(
    session: &ember_openstack::Session,
    projects: &[String],
) -> Result<Vec<String>, ResourceFailure> {
    let keystone = Keystone::new(session);
    let mut ids = Vec::with_capacity(projects.len());
    for project in projects {
        let found = keystone.project_ids(project).await.map_err(failure)?;
        match found.as_slice() {
            [one] => ids.push(one.clone()),
            [] => {
                return Err(ResourceFailure::new(format!(
                    "The Project ({project}) could not be found."
                )));
            }
            _ => {
                return Err(ResourceFailure::new(format!(
                    "Multiple projects are named {project}: give its id."
                )));
            }
        }
    }
    Ok(ids)
}

/// The row's outcome: the type's id, and what Cinder shows of it.
async fn outcome(cinder: &Cinder, id: &str) -> Result<ResourceOutcome, ResourceFailure> {
    let shown = cinder
        .volume_type(id)
        .await
        .map_err(failure)?
        .ok_or_else(|| ResourceFailure::new(format!("Volume type {id} could not be found.")))?;
    let mut attributes = Map::new();
    attributes.insert("show".to_owned(), shown.raw.clone());
    Ok(ResourceOutcome {
        physical_id: shown.id,
        attributes,
        data: json!({}),
    })
}

#[async_trait]
impl ResourceType for VolumeTypeResource {
    fn schema(&self) -> &ResourceTypeSchema {
        &self.schema
    }

    async fn create(&self, request: &ResourceRequest) -> Result<ResourceOutcome, ResourceFailure> {
        self.make(request).await
    }

    /// Heat's `handle_update`: the fields changed, the extra specs
    /// replaced (the marker kept), and a private type's projects brought
    /// to the list.
    async fn update(
        &self,
        request: &ResourceRequest,
        current: &Resource,
    ) -> Result<ResourceOutcome, ResourceFailure> {
        let spec = TypeSpec::read(&request.properties)?;
        let id = physical_id(current)
            .ok_or_else(|| ResourceFailure::new("the volume type was never made".to_owned()))?
            .to_owned();
        let changed = changed_properties(&self.schema, current, request);
        let (session, cinder) = cinder_for(&self.cloud, request.stack_id).await?;
        let fields = VolumeTypeFields {
            name: changed.contains(&"name").then(|| spec.name.clone()),
            description: changed
                .contains(&"description")
                .then(|| spec.description.clone().unwrap_or_default()),
            is_public: changed.contains(&"is_public").then_some(spec.is_public),
        };
        if fields != VolumeTypeFields::default() {
            cinder
                .update_volume_type(&id, &fields)
                .await
                .map_err(failure)?;
        }
        if changed.contains(&"metadata") {
            let shown = cinder
                .volume_type(&id)
                .await
                .map_err(failure)?
                .ok_or_else(|| {
                    ResourceFailure::new(format!("Volume type {id} could not be found."))
                })?;
            for key in shown.extra_specs.keys() {
                if key != MARKER_SPEC && !spec.extra_specs.contains_key(key) {
                    cinder.unset_extra_spec(&id, key).await.map_err(failure)?;
                }
            }
            cinder
                .set_extra_specs(&id, &spec.extra_specs)
                .await
                .map_err(failure)?;
        }
        if changed.contains(&"projects") && !spec.is_public {
            let wanted = project_ids(&session, &spec.projects).await?;
            let granted = cinder.type_access(&id).await.map_err(failure)?;
            for project in granted.iter().filter(|project| !wanted.contains(project)) {
                cinder
                    .set_type_access(&id, project, false)
                    .await
                    .map_err(failure)?;
            }
            for project in wanted.iter().filter(|project| !granted.contains(project)) {
                cinder
                    .set_type_access(&id, project, true)
                    .await
                    .map_err(failure)?;
            }
        }
        outcome(&cinder, &id).await
    }

    async fn delete(&self, current: &Resource) -> Result<(), ResourceFailure> {
        let (_, cinder) = cinder_for(&self.cloud, current.stack_id).await?;
        let id = match physical_id(current) {
            Some(id) => Some(id.to_owned()),
            None => marked(&cinder, &Cloud::marker_of(current, TYPE_KIND))
                .await?
                .map(|found| found.id),
        };
        match id {
            Some(id) => cinder.delete_volume_type(&id).await.map_err(failure),
            None => Ok(()),
        }
    }

    /// Ember checks the type is still there (Heat has no check).
    async fn check(&self, current: &Resource) -> Result<(), ResourceFailure> {
        let id = physical_id(current)
            .ok_or_else(|| ResourceFailure::new("the volume type was never made".to_owned()))?;
        let (_, cinder) = cinder_for(&self.cloud, current.stack_id).await?;
        match cinder.volume_type(id).await.map_err(failure)? {
            Some(_) => Ok(()),
            None => Err(ResourceFailure::new(format!(
                "Volume type {id} could not be found."
            ))),
        }
    }

    /// A create run again adopts the type carrying the row's marker; an
    /// update sets again what it sets.
    fn take_over(&self, step: StackAction) -> Result<(), String> {
        let _ = step;
        Ok(())
    }
}

/// The encryption's fields as Cinder takes them (`None`s as nulls, as
/// Heat sends them).
fn encryption_spec(properties: &Map<String, Value>, names: &[&str]) -> Map<String, Value> {
    names
        .iter()
        .map(|name| {
            (
                (*name).to_owned(),
                properties.get(*name).cloned().unwrap_or(Value::Null),
            )
        })
        .collect()
}

/// The fields an encryption carries (all but the type it is for).
const ENCRYPTION_FIELDS: [&str; 4] = ["provider", "control_location", "cipher", "key_size"];

pub struct EncryptedVolumeTypeResource {
    schema: ResourceTypeSchema,
    cloud: Cloud,
}

impl EncryptedVolumeTypeResource {
    pub fn new(cloud: Cloud) -> EncryptedVolumeTypeResource {
        EncryptedVolumeTypeResource {
            schema: encrypted_schema(),
            cloud,
        }
    }
}

/// The type `name_or_id` names, or Heat's words for none.
async fn type_id(cinder: &Cinder, name_or_id: &str) -> Result<String, ResourceFailure> {
    cinder
        .find_volume_type(name_or_id)
        .await
        .map_err(failure)?
        .map(|found| found.id)
        .ok_or_else(|| {
            ResourceFailure::new(format!("The VolumeType ({name_or_id}) could not be found."))
        })
}

/// The row's outcome: the type's id, and the encryption Cinder shows.
async fn encryption_outcome(
    cinder: &Cinder,
    type_id: &str,
) -> Result<ResourceOutcome, ResourceFailure> {
    let shown = cinder.encryption(type_id).await.map_err(failure)?;
    let mut attributes = Map::new();
    attributes.insert(
        "show".to_owned(),
        shown.map_or(Value::Null, |encryption| encryption.raw),
    );
    Ok(ResourceOutcome {
        physical_id: type_id.to_owned(),
        attributes,
        data: json!({}),
    })
}

#[async_trait]
impl ResourceType for EncryptedVolumeTypeResource {
    fn schema(&self) -> &ResourceTypeSchema {
        &self.schema
    }

    async fn create(&self, request: &ResourceRequest) -> Result<ResourceOutcome, ResourceFailure> {
        let (_, cinder) = cinder_for(&self.cloud, request.stack_id).await?;
        let name_or_id = text(&request.properties, "volume_type").unwrap_or_default();
        let id = type_id(&cinder, &name_or_id).await?;
        cinder
            .create_encryption(
                &id,
                &encryption_spec(&request.properties, &ENCRYPTION_FIELDS),
            )
            .await
            .map_err(failure)?;
        encryption_outcome(&cinder, &id).await
    }

    /// A create run again finds the encryption an earlier attempt gave the
    /// type, and sets its fields as asked.
    async fn resume_create(
        &self,
        request: &ResourceRequest,
        in_flight: &Resource,
    ) -> Result<ResourceOutcome, ResourceFailure> {
        let _ = in_flight;
        let (_, cinder) = cinder_for(&self.cloud, request.stack_id).await?;
        let name_or_id = text(&request.properties, "volume_type").unwrap_or_default();
        let id = type_id(&cinder, &name_or_id).await?;
        let spec = encryption_spec(&request.properties, &ENCRYPTION_FIELDS);
        match cinder.encryption(&id).await.map_err(failure)? {
            Some(made) => {
                let encryption_id = made.encryption_id.unwrap_or_else(|| "provider".to_owned());
                cinder
                    .update_encryption(&id, &encryption_id, &spec)
                    .await
                    .map_err(failure)?;
            }
            None => cinder
                .create_encryption(&id, &spec)
                .await
                .map_err(failure)?,
        }
        encryption_outcome(&cinder, &id).await
    }

    /// Heat's `handle_update`: the changed fields of the encryption.
    async fn update(
        &self,
        request: &ResourceRequest,
        current: &Resource,
    ) -> Result<ResourceOutcome, ResourceFailure> {
        let id = physical_id(current)
            .ok_or_else(|| ResourceFailure::new("the encryption was never made".to_owned()))?
            .to_owned();
        let (_, cinder) = cinder_for(&self.cloud, request.stack_id).await?;
        let changed: Vec<&str> = changed_properties(&self.schema, current, request)
            .into_iter()
            .filter(|name| ENCRYPTION_FIELDS.contains(name))
            .collect();
        if !changed.is_empty() {
            let made = cinder
                .encryption(&id)
                .await
                .map_err(failure)?
                .ok_or_else(|| {
                    ResourceFailure::new(format!(
                        "Volume type encryption for type {id} does not exist."
                    ))
                })?;
            let encryption_id = made.encryption_id.unwrap_or_else(|| "provider".to_owned());
            cinder
                .update_encryption(
                    &id,
                    &encryption_id,
                    &encryption_spec(&request.properties, &changed),
                )
                .await
                .map_err(failure)?;
        }
        encryption_outcome(&cinder, &id).await
    }

    /// Takes the type's encryption away; a type gone, or without one, is
    /// done. A row that recorded no type made none: a create's encryption
    /// is recorded with the call that made it.
    async fn delete(&self, current: &Resource) -> Result<(), ResourceFailure> {
        let Some(id) = physical_id(current) else {
            return Ok(());
        };
        let (_, cinder) = cinder_for(&self.cloud, current.stack_id).await?;
        match cinder.encryption(id).await.map_err(failure)? {
            Some(made) => {
                let encryption_id = made.encryption_id.unwrap_or_else(|| "provider".to_owned());
                cinder
                    .delete_encryption(id, &encryption_id)
                    .await
                    .map_err(failure)
            }
            None => Ok(()),
        }
    }

    async fn check(&self, current: &Resource) -> Result<(), ResourceFailure> {
        let id = physical_id(current)
            .ok_or_else(|| ResourceFailure::new("the encryption was never made".to_owned()))?;
        let (_, cinder) = cinder_for(&self.cloud, current.stack_id).await?;
        match cinder.encryption(id).await.map_err(failure)? {
            Some(_) => Ok(()),
            None => Err(ResourceFailure::new(format!(
                "Volume type encryption for type {id} does not exist."
            ))),
        }
    }

    fn take_over(&self, step: StackAction) -> Result<(), String> {
        let _ = step;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(properties: Value) -> Result<TypeSpec, ResourceFailure> {
        TypeSpec::read(properties.as_object().expect("a map"))
    }

    #[test]
    fn a_public_type_takes_no_projects_and_the_marker_is_embers() {
        let spec = read(json!({"name": "gold", "is_public": false, "projects": ["demo"], "metadata": {"volume_backend_name": "lvm", "copies": 2}}))
            .expect("valid");
        assert_eq!(spec.projects, vec!["demo".to_owned()]);
        assert_eq!(spec.extra_specs["copies"], "2");
        assert_eq!(
            read(json!({"name": "gold", "is_public": true, "projects": ["demo"]}))
                .expect_err("public with projects")
                .to_string(),
            "Can not specify property \"projects\" if the volume type is public."
        );
        assert!(
            read(json!({"name": "gold", "metadata": {MARKER_SPEC: "x"}}))
                .expect_err("the marker")
                .to_string()
                .contains("Ember's own")
        );
    }

    #[test]
    fn an_encryption_sends_nulls_for_what_is_not_given() {
        let properties =
            json!({"provider": "luks", "control_location": "front-end", "key_size": 256});
        assert_eq!(
            Value::Object(encryption_spec(
                properties.as_object().expect("a map"),
                &ENCRYPTION_FIELDS
            )),
            json!({"provider": "luks", "control_location": "front-end", "cipher": null, "key_size": 256})
        );
    }
}
