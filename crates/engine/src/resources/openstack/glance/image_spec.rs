//! What a `OS::Glance::WebImage`'s properties say: the schema (Heat's
//! names, defaults, allowed values and update rules), the checks Heat
//! makes before a create, the image Glance is asked for, and the changes
//! an update asks of it. Pure: no call to the cloud here.

use std::collections::BTreeSet;

use ember_openstack::glance::{ImageChange, NewImage};
use regex::Regex;
use serde_json::{Map, Value, json};

use super::super::heat::does_not_match;
use super::super::text;
use crate::resources::{PropertySchema, PropertyType, ResourceFailure, ResourceTypeSchema};

/// The image property carrying the row's marker.
pub const MARKER_KEY: &str = "ember_resource";

/// Heat's `AllowedPattern` for `kernel_id` and `ramdisk_id`.
const GLANCE_ID_PATTERN: &str =
    "^([0-9a-fA-F]){8}-([0-9a-fA-F]){4}-([0-9a-fA-F]){4}-([0-9a-fA-F]){4}-([0-9a-fA-F]){12}$";

/// The fields an update sets as they are (besides tags, members,
/// extra properties and `active`, which have their own calls).
const UPDATED_FIELDS: [&str; 8] = [
    "protected",
    "architecture",
    "kernel_id",
    "os_distro",
    "os_version",
    "owner",
    "visibility",
    "ramdisk_id",
];

/// The properties that are not fields of the image Glance makes.
const NOT_IMAGE_FIELDS: [&str; 6] = ["id", "name", "tags", "location", "active", "members"];

pub fn schema() -> ResourceTypeSchema {
    let formats = |values: &[&str]| values.iter().map(|value| json!(value)).collect();
    ResourceTypeSchema {
        type_name: "OS::Glance::WebImage",
        description: "An image Glance imports from a URL (web-download).",
        properties: vec![
            PropertySchema::new("name", PropertyType::String, "Name for the image. The name of an image is not unique to a Image Service node."),
            PropertySchema::new("id", PropertyType::String, "The image ID. Glance will generate a UUID if not specified (Ember derives one from the resource)."),
            PropertySchema::new("min_disk", PropertyType::Integer, "Amount of disk space (in GB) required to boot image. Default value is 0 if not specified and means no limit on the disk size.")
                .default(json!(0))
                .range(0.0, f64::from(i32::MAX)),
            PropertySchema::new("min_ram", PropertyType::Integer, "Amount of ram (in MB) required to boot image. Default value is 0 if not specified and means no limit on the ram size.")
                .default(json!(0))
                .range(0.0, f64::from(i32::MAX)),
            PropertySchema::new("protected", PropertyType::Boolean, "Whether the image can be deleted. If the value is True, the image is protected and cannot be deleted.")
                .update_allowed()
                .default(json!(false)),
            PropertySchema::new("disk_format", PropertyType::String, "Disk format of image.")
                .required()
                .allowed_values(formats(&["ami", "ari", "aki", "vhd", "vhdx", "vmdk", "raw", "qcow2", "vdi", "iso", "ploop"])),
            PropertySchema::new("container_format", PropertyType::String, "Container format of image.")
                .required()
                .allowed_values(formats(&["ami", "ari", "aki", "bare", "ovf", "ova", "docker"])),
            PropertySchema::new("location", PropertyType::String, "URL where the data for this image already resides. For example, if the image data is stored in swift, you could specify \"swift://example.com/container/obj\".")
                .required(),
            PropertySchema::new("tags", PropertyType::List, "List of image tags.").update_allowed(),
            PropertySchema::new("architecture", PropertyType::String, "Operating system architecture.").update_allowed(),
            PropertySchema::new("kernel_id", PropertyType::String, "ID of image stored in Glance that should be used as the kernel when booting an AMI-style image.").update_allowed(),
            PropertySchema::new("os_distro", PropertyType::String, "The common name of the operating system distribution in lowercase.").update_allowed(),
            PropertySchema::new("os_version", PropertyType::String, "Operating system version as specified by the distributor.").update_allowed(),
            PropertySchema::new("owner", PropertyType::String, "Owner of the image.").update_allowed(),
            PropertySchema::new("extra_properties", PropertyType::Map, "Arbitrary properties to associate with the image.")
                .update_allowed()
                .default(json!({})),
            PropertySchema::new("visibility", PropertyType::String, "Scope of image accessibility.")
                .update_allowed()
                .default(json!("private"))
                .allowed_values(formats(&["public", "private", "community", "shared"])),
            PropertySchema::new("ramdisk_id", PropertyType::String, "ID of image stored in Glance that should be used as the ramdisk when booting an AMI-style image.").update_allowed(),
            PropertySchema::new("active", PropertyType::Boolean, "Activate or deactivate the image. Requires Admin Access.")
                .update_allowed()
                .default(json!(true)),
            PropertySchema::new("members", PropertyType::List, "List of additional members that are permitted to read the image. This may be a Keystone Project IDs or User IDs, depending on the Glance configuration in use.")
                .update_allowed(),
        ],
        attributes: Vec::new(),
        accepts_any_properties: false,
        accepts_any_attributes: false,
    }
}

/// Heat's `validate`: formats that must match, members only for shared
/// images, kernel and ramdisk ids that are image ids.
pub fn check(properties: &Map<String, Value>) -> Result<(), ResourceFailure> {
    let container_format = text(properties, "container_format").unwrap_or_default();
    let disk_format = text(properties, "disk_format").unwrap_or_default();
    if ["ami", "ari", "aki"].contains(&container_format.as_str()) && disk_format != container_format
    {
        return Err(ResourceFailure::new(
            "Invalid mix of disk and container formats. When setting a disk or container format to one of 'aki', 'ari', or 'ami', the container and disk formats must match."
                .to_owned(),
        ));
    }
    if !strings(properties.get("members")).is_empty()
        && text(properties, "visibility").as_deref() != Some("shared")
    {
        return Err(ResourceFailure::new(
            "members property should only be specified for visibility with value shared."
                .to_owned(),
        ));
    }
    let image_id = Regex::new(GLANCE_ID_PATTERN)
        .map_err(|error| ResourceFailure::new(format!("{GLANCE_ID_PATTERN}: {error}")))?;
    for name in ["kernel_id", "ramdisk_id"] {
        if let Some(value) = text(properties, name)
            && !image_id.is_match(&value)
        {
            return Err(does_not_match(name, &value, GLANCE_ID_PATTERN));
        }
    }
    Ok(())
}

/// A list property's items as text.
pub fn strings(value: Option<&Value>) -> Vec<String> {
    value
        .and_then(Value::as_array)
        .map(|items| items.iter().map(field_text).collect())
        .unwrap_or_default()
}

/// Glance's additional properties are text.
fn field_text(value: &Value) -> String {
    match value {
        Value::String(text) => text.clone(),
        other => other.to_string(),
    }
}

/// The image Glance is asked to make (without its data, members or extra
/// properties, which come after, as in Heat), carrying the marker.
pub fn new_image(properties: &Map<String, Value>, id: &str, marker: &str) -> NewImage {
    let mut fields: Map<String, Value> = properties
        .iter()
        .filter(|(name, value)| {
            !value.is_null()
                && !NOT_IMAGE_FIELDS.contains(&name.as_str())
                && name.as_str() != "extra_properties"
        })
        .map(|(name, value)| (name.clone(), value.clone()))
        .collect();
    fields.insert(MARKER_KEY.to_owned(), json!(marker));
    NewImage {
        id: id.to_owned(),
        name: text(properties, "name"),
        tags: strings(properties.get("tags")),
        properties: fields,
    }
}

/// The extra properties as Glance's field changes.
pub fn extra_properties(properties: &Map<String, Value>) -> Vec<ImageChange> {
    properties
        .get("extra_properties")
        .and_then(Value::as_object)
        .map(|extra| {
            extra
                .iter()
                .map(|(name, value)| ImageChange::Set(name.clone(), json!(field_text(value))))
                .collect()
        })
        .unwrap_or_default()
}

/// The field changes an update asks for: each changed field set (or
/// removed when no longer given), extra properties set, and those no
/// longer given removed (never a field of the schema, nor the marker).
pub fn field_changes(old: &Map<String, Value>, new: &Map<String, Value>) -> Vec<ImageChange> {
    let mut changes = Vec::new();
    for field in UPDATED_FIELDS {
        let (before, after) = (old.get(field), new.get(field));
        if before == after {
            continue;
        }
        match after {
            Some(value) if !value.is_null() => {
                changes.push(ImageChange::Set(field.to_owned(), value.clone()));
            }
            _ if before.is_some_and(|value| !value.is_null()) => {
                changes.push(ImageChange::Remove(field.to_owned()));
            }
            _ => {}
        }
    }
    let extra = |properties: &Map<String, Value>| {
        properties
            .get("extra_properties")
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default()
    };
    let (before, after) = (extra(old), extra(new));
    for (name, value) in &after {
        if before.get(name) != Some(value) {
            changes.push(ImageChange::Set(name.clone(), json!(field_text(value))));
        }
    }
    let fields: BTreeSet<&str> = schema()
        .properties
        .iter()
        .map(|property| property.name)
        .collect();
    for name in before.keys() {
        if !after.contains_key(name) && !fields.contains(name.as_str()) && name != MARKER_KEY {
            changes.push(ImageChange::Remove(name.clone()));
        }
    }
    changes
}

/// What to add and what to remove to go from `before` to `after`.
pub fn difference(before: &[String], after: &[String]) -> (Vec<String>, Vec<String>) {
    let added = after
        .iter()
        .filter(|item| !before.contains(item))
        .cloned()
        .collect();
    let removed = before
        .iter()
        .filter(|item| !after.contains(item))
        .cloned()
        .collect();
    (added, removed)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(value: Value) -> Map<String, Value> {
        value.as_object().cloned().expect("a map")
    }

    #[test]
    fn heat_checks_are_made() {
        let valid = map(json!({"disk_format": "raw", "container_format": "bare"}));
        assert!(check(&valid).is_ok());
        assert!(
            check(&map(
                json!({"disk_format": "raw", "container_format": "ami"})
            ))
            .expect_err("mixed")
            .to_string()
            .starts_with("Invalid mix of disk and container formats.")
        );
        assert_eq!(
            check(&map(json!({"disk_format": "raw", "container_format": "bare", "visibility": "private", "members": ["p1"]})))
                .expect_err("members of a private image")
                .to_string(),
            "members property should only be specified for visibility with value shared."
        );
        assert_eq!(
            check(&map(
                json!({"disk_format": "raw", "container_format": "bare", "kernel_id": "vmlinuz"})
            ))
            .expect_err("not an image id")
            .to_string(),
            format!("kernel_id: \"vmlinuz\" does not match pattern \"{GLANCE_ID_PATTERN}\"")
        );
    }

    #[test]
    fn the_image_asked_for_carries_the_marker_and_no_import_details() {
        let properties = map(json!({
            "name": "web", "disk_format": "raw", "container_format": "bare",
            "location": "http://example.com/web.raw", "min_disk": 0, "min_ram": 0,
            "protected": false, "visibility": "private", "active": true,
            "tags": ["a", "b"], "members": [], "extra_properties": {"hw_disk_bus": "scsi", "cores": 2},
            "os_distro": "debian"
        }));
        let image = new_image(&properties, "i1", "ember-1");
        assert_eq!(image.id, "i1");
        assert_eq!(image.name.as_deref(), Some("web"));
        assert_eq!(image.tags, ["a", "b"]);
        assert_eq!(
            Value::Object(image.properties),
            json!({
                "disk_format": "raw", "container_format": "bare", "min_disk": 0, "min_ram": 0,
                "protected": false, "visibility": "private", "os_distro": "debian",
                "ember_resource": "ember-1"
            })
        );
        assert_eq!(
            extra_properties(&properties),
            [
                ImageChange::Set("hw_disk_bus".to_owned(), json!("scsi")),
                ImageChange::Set("cores".to_owned(), json!("2")),
            ]
        );
    }

    #[test]
    fn an_update_changes_only_what_changed() {
        let old = map(json!({
            "protected": false, "visibility": "private", "os_distro": "debian",
            "extra_properties": {"hw_disk_bus": "scsi", "keep": "1", "drop": "x"}
        }));
        let new = map(json!({
            "protected": true, "visibility": "private", "architecture": "x86_64",
            "extra_properties": {"hw_disk_bus": "virtio", "keep": "1"}
        }));
        assert_eq!(
            field_changes(&old, &new),
            [
                ImageChange::Set("protected".to_owned(), json!(true)),
                ImageChange::Set("architecture".to_owned(), json!("x86_64")),
                ImageChange::Remove("os_distro".to_owned()),
                ImageChange::Set("hw_disk_bus".to_owned(), json!("virtio")),
                ImageChange::Remove("drop".to_owned()),
            ]
        );
        assert_eq!(
            difference(
                &["a".to_owned(), "b".to_owned()],
                &["b".to_owned(), "c".to_owned()]
            ),
            (vec!["c".to_owned()], vec!["a".to_owned()])
        );
    }
}
