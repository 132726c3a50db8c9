//! What a volume's properties say, in either dialect: the schemas (Heat's
//! names, types, defaults and update rules), the checks Heat makes before
//! a create (which sources go together), the volume Cinder is asked for,
//! and the attributes Heat shows of it. Pure: no call to the cloud here.

use std::collections::BTreeMap;

use ember_openstack::cinder::{NewVolume, Volume};
use serde_json::{Map, Value, json};

use super::super::super::heat::{python_json, python_repr, python_str};
use super::super::super::text;
use super::super::Dialect;
use crate::resources::{
    AttributeSchema, PropertySchema, PropertyType, ResourceFailure, ResourceTypeSchema,
};

/// The metadata key carrying the row's marker (see [`crate::resources::openstack::Cloud::marker`]).
pub const MARKER_KEY: &str = "ember_resource";

/// Cinder keeps a volume's size in a 32-bit column: Heat's `Range(min=1)`
/// has no maximum, and this is the largest size Cinder can record.
const LARGEST_SIZE: f64 = 2_147_483_647.0;

pub fn schema(dialect: Dialect) -> ResourceTypeSchema {
    match dialect {
        Dialect::OpenStack => openstack_schema(),
        Dialect::Aws => aws_schema(),
    }
}

fn openstack_schema() -> ResourceTypeSchema {
    let attribute = |name, description| AttributeSchema { name, description };
    ResourceTypeSchema {
        type_name: "OS::Cinder::Volume",
        description: "A Cinder volume: block storage, empty or made from an image, a snapshot, another volume or a backup.",
        properties: vec![
            PropertySchema::new("availability_zone", PropertyType::String, "The availability zone in which the volume will be created."),
            PropertySchema::new("size", PropertyType::Integer, "The size of the volume in GB. On update only increase in size is supported. This property is required unless property backup_id or source_volid or snapshot_id is specified.")
                .update_allowed()
                .range(1.0, LARGEST_SIZE),
            PropertySchema::new("snapshot_id", PropertyType::String, "If specified, the snapshot to create the volume from."),
            PropertySchema::new("backup_id", PropertyType::String, "If specified, the backup to create the volume from.")
                .update_allowed(),
            PropertySchema::new("name", PropertyType::String, "A name used to distinguish the volume.")
                .update_allowed(),
            PropertySchema::new("description", PropertyType::String, "A description of the volume.")
                .update_allowed(),
            PropertySchema::new("volume_type", PropertyType::String, "If specified, the type of volume to use, mapping to a specific backend.")
                .update_allowed(),
            PropertySchema::new("metadata", PropertyType::Map, "Key/value pairs to associate with the volume.")
                .update_allowed()
                .default(json!({})),
            PropertySchema::new("imageRef", PropertyType::String, "The ID of the image to create the volume from (deprecated: use image)."),
            PropertySchema::new("image", PropertyType::String, "If specified, the name or ID of the image to create the volume from."),
            PropertySchema::new("source_volid", PropertyType::String, "If specified, the volume to use as source."),
            PropertySchema::new("scheduler_hints", PropertyType::Map, "Arbitrary key-value pairs specified by the client to help the Cinder scheduler creating a volume."),
            PropertySchema::new("read_only", PropertyType::Boolean, "Enables or disables read-only access mode of volume.")
                .update_allowed(),
            PropertySchema::new("multiattach", PropertyType::Boolean, "Whether allow the volume to be attached more than once (hidden in Heat, never sent: a volume type says it).")
                .default(json!(false)),
        ],
        attributes: vec![
            attribute("availability_zone", "The availability zone in which the volume is located."),
            attribute("size", "The size of the volume in GB."),
            attribute("snapshot_id", "The snapshot the volume was created from, if any."),
            attribute("display_name", "Name of the volume."),
            attribute("display_description", "Description of the volume."),
            attribute("volume_type", "The type of the volume mapping to a backend, if any."),
            attribute("metadata", "Key/value pairs associated with the volume."),
            attribute("source_volid", "The volume used as source, if any."),
            attribute("status", "The current status of the volume."),
            attribute("created_at", "The timestamp indicating volume creation."),
            attribute("bootable", "Boolean indicating if the volume can be booted or not."),
            attribute("metadata_values", "Key/value pairs associated with the volume in raw dict form."),
            attribute("encrypted", "Boolean indicating if the volume is encrypted or not."),
            attribute("attachments", "A string representation of the list of attachments of the volume (deprecated: use attachments_list)."),
            attribute("attachments_list", "The list of attachments of the volume."),
            attribute("multiattach", "Boolean indicating whether allow the volume to be attached more than once."),
        ],
        accepts_any_properties: false,
        accepts_any_attributes: false,
    }
}

fn aws_schema() -> ResourceTypeSchema {
    ResourceTypeSchema {
        type_name: "AWS::EC2::Volume",
        description: "A volume (a Cinder volume), in CloudFormation's words.",
        properties: vec![
            PropertySchema::new(
                "AvailabilityZone",
                PropertyType::String,
                "The availability zone in which the volume will be created.",
            )
            .required(),
            PropertySchema::new(
                "Size",
                PropertyType::Integer,
                "The size of the volume in GB.",
            )
            .range(1.0, LARGEST_SIZE),
            PropertySchema::new(
                "SnapshotId",
                PropertyType::String,
                "If specified, the backup used as the source to create the volume.",
            ),
            PropertySchema::new(
                "Tags",
                PropertyType::List,
                "The list of tags (Key, Value) to associate with the volume.",
            ),
        ],
        attributes: Vec::new(),
        accepts_any_properties: false,
        accepts_any_attributes: false,
    }
}

/// What a volume is to be, read from either dialect's properties.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct VolumeSpec {
    /// `None`: the physical resource name.
    pub name: Option<String>,
    /// `None`: none (OpenStack), the physical resource name (AWS).
    pub description: Option<String>,
    pub size: Option<u64>,
    pub availability_zone: Option<String>,
    /// A name or id, found in Glance at create.
    pub image: Option<String>,
    /// An id, as given (Heat's hidden `imageRef`).
    pub image_id: Option<String>,
    pub snapshot_id: Option<String>,
    pub backup_id: Option<String>,
    pub source_volume_id: Option<String>,
    pub volume_type: Option<String>,
    /// The user's metadata (the marker is added when the volume is asked for).
    pub metadata: BTreeMap<String, String>,
    pub scheduler_hints: Map<String, Value>,
    pub read_only: Option<bool>,
    /// Which twin: an AWS volume's description is its physical name.
    pub dialect: Dialect,
}

impl VolumeSpec {
    /// Reads and checks `properties` as Heat's `validate` does.
    pub fn read(
        dialect: Dialect,
        properties: &Map<String, Value>,
    ) -> Result<VolumeSpec, ResourceFailure> {
        let spec = match dialect {
            Dialect::OpenStack => VolumeSpec {
                name: text(properties, "name"),
                description: text(properties, "description"),
                size: size(properties, "size")?,
                availability_zone: text(properties, "availability_zone")
                    .filter(|zone| !zone.is_empty()),
                image: text(properties, "image"),
                image_id: text(properties, "imageRef"),
                snapshot_id: text(properties, "snapshot_id"),
                backup_id: text(properties, "backup_id"),
                source_volume_id: text(properties, "source_volid"),
                volume_type: text(properties, "volume_type"),
                metadata: string_map(properties.get("metadata")),
                scheduler_hints: properties
                    .get("scheduler_hints")
                    .and_then(Value::as_object)
                    .cloned()
                    .unwrap_or_default(),
                read_only: properties.get("read_only").and_then(Value::as_bool),
                dialect: Dialect::OpenStack,
            },
            Dialect::Aws => VolumeSpec {
                size: size(properties, "Size")?,
                availability_zone: text(properties, "AvailabilityZone"),
                backup_id: text(properties, "SnapshotId"),
                metadata: tags(properties.get("Tags"))?,
                dialect: Dialect::Aws,
                ..VolumeSpec::default()
            },
        };
        spec.check_sources()?;
        Ok(spec)
    }

    /// Heat's checks of what the volume is made from.
    fn check_sources(&self) -> Result<(), ResourceFailure> {
        if self.image.is_some() && self.image_id.is_some() {
            return Err(ResourceFailure::new(
                "Cannot define the following properties at the same time: image, imageRef."
                    .to_owned(),
            ));
        }
        if self.backup_id.is_some() {
            return Ok(());
        }
        let given = |value: &Option<String>| value.as_deref().is_some_and(|id| !id.is_empty());
        let mut exclusive = Vec::new();
        let mut allow_no_size = Vec::new();
        if given(&self.snapshot_id) {
            exclusive.push(json!("snapshot_id"));
            allow_no_size.push("snapshot_id");
        }
        if given(&self.source_volume_id) {
            exclusive.push(json!("source_volid"));
            allow_no_size.push("source_volid");
        }
        if given(&self.image) {
            exclusive.push(json!("image"));
        }
        if given(&self.image_id) {
            exclusive.push(json!("imageRef"));
        }
        let specified = python_repr(&Value::Array(exclusive.clone()));
        match self.size {
            None if allow_no_size.len() != 1 || exclusive.len() != 1 => {
                Err(ResourceFailure::new(format!(
                    "If neither \"backup_id\" nor \"size\" is provided, one and only one of \"source_volid\", \"snapshot_id\" must be specified, but currently specified options: {specified}."
                )))
            }
            Some(_) if exclusive.len() > 1 => Err(ResourceFailure::new(format!(
                "If \"size\" is provided, only one of \"image\", \"imageRef\", \"source_volid\", \"snapshot_id\" can be specified, but currently specified options: {specified}."
            ))),
            _ => Ok(()),
        }
    }

    /// The name the volume has: the property, or the physical name.
    pub fn name_or(&self, physical_name: &str) -> String {
        self.name
            .clone()
            .unwrap_or_else(|| physical_name.to_owned())
    }

    /// The description the volume has: the property (OpenStack), or the
    /// physical name (AWS, as Heat's base volume).
    pub fn description_or(&self, physical_name: &str) -> Option<String> {
        match self.dialect {
            Dialect::Aws => Some(physical_name.to_owned()),
            Dialect::OpenStack => self.description.clone(),
        }
    }

    /// The metadata the volume carries: the user's and the marker.
    pub fn metadata_with(&self, marker: &str) -> BTreeMap<String, String> {
        let mut metadata = self.metadata.clone();
        metadata.insert(MARKER_KEY.to_owned(), marker.to_owned());
        metadata
    }

    /// The volume Cinder is asked for (`image_id`: the image found in
    /// Glance). `multiattach` is never sent, as Heat: a volume type says it.
    pub fn new_volume(
        &self,
        physical_name: &str,
        image_id: Option<String>,
        marker: &str,
    ) -> NewVolume {
        NewVolume {
            name: Some(self.name_or(physical_name)),
            description: self.description_or(physical_name),
            size: self.size,
            volume_type: self.volume_type.clone(),
            availability_zone: self.availability_zone.clone(),
            image_id: image_id.or_else(|| self.image_id.clone()),
            snapshot_id: self.snapshot_id.clone(),
            source_volume_id: self.source_volume_id.clone(),
            metadata: self.metadata_with(marker),
            multiattach: None,
            scheduler_hints: self.scheduler_hints.clone(),
        }
    }
}

fn size(properties: &Map<String, Value>, name: &str) -> Result<Option<u64>, ResourceFailure> {
    match properties.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(value) => value
            .as_u64()
            .filter(|size| *size >= 1)
            .map(Some)
            .ok_or_else(|| {
                ResourceFailure::new(format!("{name}: {value} is not a size in GB (at least 1)"))
            }),
    }
}

/// A map property as Cinder's string metadata (other values as their JSON text).
fn string_map(value: Option<&Value>) -> BTreeMap<String, String> {
    value
        .and_then(Value::as_object)
        .map(|map| {
            map.iter()
                .map(|(key, value)| {
                    let value = match value {
                        Value::String(text) => text.clone(),
                        other => other.to_string(),
                    };
                    (key.clone(), value)
                })
                .collect()
        })
        .unwrap_or_default()
}

/// AWS `Tags` (`[{Key, Value}]`) as metadata.
fn tags(value: Option<&Value>) -> Result<BTreeMap<String, String>, ResourceFailure> {
    let Some(items) = value.and_then(Value::as_array) else {
        return Ok(BTreeMap::new());
    };
    items
        .iter()
        .enumerate()
        .map(|(index, item)| {
            let field = |name: &str| {
                item.get(name)
                    .filter(|value| !value.is_null())
                    .map(|value| match value {
                        Value::String(text) => text.clone(),
                        other => other.to_string(),
                    })
                    .ok_or_else(|| {
                        ResourceFailure::new(format!("Tags[{index}]: Property {name} not assigned"))
                    })
            };
            Ok((field("Key")?, field("Value")?))
        })
        .collect()
}

/// What Heat shows of a volume: Cinder's fields (the `show` attribute), and
/// for `OS::Cinder::Volume` its own attributes over them, as Heat computes
/// them — most as Python's `str()` of Cinder's value (`size` is `"1"`),
/// `metadata` as JSON text, `metadata_values` and `attachments_list` as
/// they are.
pub fn attributes(dialect: Dialect, volume: &Volume) -> Map<String, Value> {
    let mut attributes = volume.raw.as_object().cloned().unwrap_or_default();
    if dialect == Dialect::Aws {
        return attributes;
    }
    let raw = |name: &str| volume.raw.get(name).cloned().unwrap_or(Value::Null);
    for name in [
        "availability_zone",
        "size",
        "snapshot_id",
        "volume_type",
        "source_volid",
        "status",
        "created_at",
        "bootable",
        "encrypted",
        "multiattach",
    ] {
        attributes.insert(name.to_owned(), Value::String(python_str(&raw(name))));
    }
    attributes.insert("display_name".to_owned(), raw("name"));
    attributes.insert("display_description".to_owned(), raw("description"));
    attributes.insert(
        "metadata".to_owned(),
        Value::String(python_json(&json!(volume.metadata))),
    );
    attributes.insert("metadata_values".to_owned(), json!(volume.metadata));
    attributes.insert(
        "attachments".to_owned(),
        Value::String(python_repr(&raw("attachments"))),
    );
    attributes.insert("attachments_list".to_owned(), raw("attachments"));
    attributes
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(dialect: Dialect, properties: Value) -> Result<VolumeSpec, ResourceFailure> {
        VolumeSpec::read(dialect, properties.as_object().expect("a map"))
    }

    #[test]
    fn sources_are_checked_as_heat_checks_them() {
        assert!(read(Dialect::OpenStack, json!({"size": 1})).is_ok());
        assert!(read(Dialect::OpenStack, json!({"source_volid": "v1"})).is_ok());
        assert!(read(Dialect::OpenStack, json!({"backup_id": "b1"})).is_ok());
        assert!(read(Dialect::OpenStack, json!({"size": 2, "image": "cirros"})).is_ok());
        assert_eq!(
            read(Dialect::OpenStack, json!({}))
                .expect_err("no source")
                .to_string(),
            "If neither \"backup_id\" nor \"size\" is provided, one and only one of \"source_volid\", \"snapshot_id\" must be specified, but currently specified options: []."
        );
        assert_eq!(
            read(Dialect::OpenStack, json!({"image": "cirros"}))
                .expect_err("an image needs a size")
                .to_string(),
            "If neither \"backup_id\" nor \"size\" is provided, one and only one of \"source_volid\", \"snapshot_id\" must be specified, but currently specified options: ['image']."
        );
        assert_eq!(
            read(
                Dialect::OpenStack,
                json!({"size": 1, "snapshot_id": "s1", "image": "cirros"})
            )
            .expect_err("two sources")
            .to_string(),
            "If \"size\" is provided, only one of \"image\", \"imageRef\", \"source_volid\", \"snapshot_id\" can be specified, but currently specified options: ['snapshot_id', 'image']."
        );
        assert_eq!(
            read(
                Dialect::OpenStack,
                json!({"size": 1, "image": "a", "imageRef": "b"})
            )
            .expect_err("both names of the image")
            .to_string(),
            "Cannot define the following properties at the same time: image, imageRef."
        );
        assert!(read(Dialect::OpenStack, json!({"size": 0})).is_err());
    }

    #[test]
    fn the_volume_asked_for_carries_the_marker_and_defaults_its_name() {
        let spec = read(
            Dialect::OpenStack,
            json!({"size": 1, "metadata": {"role": "db", "replicas": 2}, "volume_type": "fast"}),
        )
        .expect("valid");
        let volume = spec.new_volume("web-data-0123456789ab", None, "ember-1");
        assert_eq!(volume.name.as_deref(), Some("web-data-0123456789ab"));
        assert_eq!(volume.description, None);
        assert_eq!(volume.size, Some(1));
        assert_eq!(volume.volume_type.as_deref(), Some("fast"));
        assert_eq!(volume.multiattach, None);
        assert_eq!(
            volume.metadata,
            BTreeMap::from([
                ("ember_resource".to_owned(), "ember-1".to_owned()),
                ("replicas".to_owned(), "2".to_owned()),
                ("role".to_owned(), "db".to_owned()),
            ])
        );
        let aws = read(
            Dialect::Aws,
            json!({"AvailabilityZone": "nova", "Size": 2, "Tags": [{"Key": "role", "Value": "db"}]}),
        )
        .expect("valid");
        let volume = aws.new_volume("web-data-0123456789ab", None, "ember-1");
        assert_eq!(volume.description.as_deref(), Some("web-data-0123456789ab"));
        assert_eq!(volume.availability_zone.as_deref(), Some("nova"));
        assert_eq!(volume.metadata["role"], "db");
        assert_eq!(
            read(
                Dialect::Aws,
                json!({"AvailabilityZone": "nova", "Size": 1, "Tags": [{"Key": "role"}]})
            )
            .expect_err("a tag without a value")
            .to_string(),
            "Tags[0]: Property Value not assigned"
        );
    }

    #[test]
    fn attributes_are_what_heat_shows() {
        let raw = json!({
            "id": "v1", "name": "data", "description": null, "status": "in-use", "size": 1,
            "availability_zone": "nova", "snapshot_id": null, "bootable": "false",
            "encrypted": false, "multiattach": false, "volume_type": "__DEFAULT__",
            "created_at": "2026-01-01T00:00:00.000000", "source_volid": null,
            "metadata": {"ember_resource": "ember-1"},
            "attachments": [{"server_id": "s1", "device": "/dev/vdb"}]
        });
        let volume: Volume = serde_json::from_value(raw.clone()).expect("a volume");
        let volume = Volume { raw, ..volume };
        let shown = attributes(Dialect::OpenStack, &volume);
        assert_eq!(shown["size"], json!("1"));
        assert_eq!(shown["snapshot_id"], json!("None"));
        assert_eq!(shown["encrypted"], json!("False"));
        assert_eq!(shown["display_name"], json!("data"));
        assert_eq!(
            shown["metadata"],
            json!("{\"ember_resource\": \"ember-1\"}")
        );
        assert_eq!(
            shown["metadata_values"],
            json!({"ember_resource": "ember-1"})
        );
        assert_eq!(
            shown["attachments"],
            json!("[{'server_id': 's1', 'device': '/dev/vdb'}]")
        );
        assert_eq!(shown["attachments_list"][0]["server_id"], json!("s1"));
        assert_eq!(shown["id"], json!("v1"));
        let aws = attributes(Dialect::Aws, &volume);
        assert_eq!(aws["size"], json!(1));
    }
}
