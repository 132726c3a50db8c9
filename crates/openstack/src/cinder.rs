//! Cinder (block storage): volumes — made (empty, from an image, a
//! snapshot, another volume or a backup), read, grown, retyped, renamed,
//! made read-only and deleted — and volume types (`volume_types`). A volume Ember makes carries Ember's id in
//! its metadata, which Cinder filters on, so a create that is tried again
//! finds it. Attaching a volume to a server is asked of Nova
//! ([`crate::nova::Nova::attach_volume`]), as Heat does.

mod volume_types;

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::{Map, Value, json};

use crate::error::{Error, Result, Service};
use crate::microversion::Microversion;
use crate::session::{Call, Session, segment};

pub use volume_types::{Encryption, VolumeType, VolumeTypeFields};

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub struct Volume {
    pub id: String,
    #[serde(default)]
    pub name: Option<String>,
    /// creating, available, in-use, error, deleting, error_deleting,
    /// extending, error_extending, attaching, detaching, …
    #[serde(default)]
    pub status: String,
    #[serde(default)]
    pub size: u64,
    #[serde(default)]
    pub attachments: Vec<VolumeAttachment>,
    #[serde(default)]
    pub metadata: BTreeMap<String, String>,
    #[serde(default)]
    pub bootable: Option<String>,
    #[serde(default)]
    pub volume_type: Option<String>,
    #[serde(default)]
    pub availability_zone: Option<String>,
    #[serde(default)]
    pub description: Option<String>,
    /// Everything Cinder said, for the `show` attribute.
    #[serde(skip)]
    pub raw: Value,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
pub struct VolumeAttachment {
    #[serde(default)]
    pub server_id: String,
    #[serde(default)]
    pub attachment_id: Option<String>,
    #[serde(default)]
    pub device: Option<String>,
}

/// A volume to make.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct NewVolume {
    pub name: Option<String>,
    pub description: Option<String>,
    pub size: Option<u64>,
    pub volume_type: Option<String>,
    pub availability_zone: Option<String>,
    pub image_id: Option<String>,
    pub snapshot_id: Option<String>,
    pub source_volume_id: Option<String>,
    pub metadata: BTreeMap<String, String>,
    pub multiattach: Option<bool>,
    /// Hints for Cinder's scheduler (`OS-SCH-HNT:scheduler_hints`).
    pub scheduler_hints: Map<String, Value>,
}

/// Whether a retype may move the volume's data to another backend.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MigrationPolicy {
    /// Keep it where it is: Cinder gives up when the new type's backend
    /// is another (Heat's choice).
    Never,
    OnDemand,
}

impl MigrationPolicy {
    pub fn as_str(self) -> &'static str {
        match self {
            MigrationPolicy::Never => "never",
            MigrationPolicy::OnDemand => "on-demand",
        }
    }
}

/// Where a backup is restored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RestoreTarget {
    /// Into a new volume Cinder makes, named so.
    NewVolume { name: String },
    /// Over an existing volume (available, at least the backup's size).
    Volume { volume_id: String },
}

impl RestoreTarget {
    fn body(&self) -> Value {
        match self {
            RestoreTarget::NewVolume { name } => json!({"restore": {"name": name}}),
            RestoreTarget::Volume { volume_id } => json!({"restore": {"volume_id": volume_id}}),
        }
    }
}

/// Cinder, through one session.
#[derive(Debug, Clone)]
pub struct Cinder {
    session: Session,
    version: Microversion,
}

impl Cinder {
    /// Everything Ember asks of Cinder is in 3.0.
    pub const LEAST: Microversion = Microversion::new(3, 0);
    /// `metadata` filters on volume listings are documented from 3.0; 3.60
    /// would bring time filters Ember does not use.
    pub const WANTED: Microversion = Microversion::new(3, 59);

    pub async fn connect(session: &Session) -> Result<Cinder> {
        let spoken = session.microversions(Service::BlockStorage).await?;
        let version =
            Microversion::negotiate(Service::BlockStorage, spoken, Cinder::LEAST, Cinder::WANTED)?;
        Ok(Cinder {
            session: session.clone(),
            version,
        })
    }

    /// The microversion negotiated (in-use volumes grow from 3.42).
    pub fn version(&self) -> Microversion {
        self.version
    }

    fn call(&self, call: Call) -> Call {
        call.microversion(self.version)
    }

    pub async fn create_volume(&self, volume: &NewVolume) -> Result<Volume> {
        let answer = self
            .session
            .call(self.call(Call::post(
                Service::BlockStorage,
                "/volumes",
                new_volume_body(volume),
            )))
            .await?;
        volume_of(answer.json()?)
    }

    /// The project's volumes named `name` (exactly).
    pub async fn volumes_named(&self, name: &str) -> Result<Vec<Volume>> {
        let answer: Value = self
            .session
            .call(
                self.call(Call::get(Service::BlockStorage, "/volumes/detail").query("name", name)),
            )
            .await?
            .json()?;
        volumes_of(answer).map(|volumes| {
            volumes
                .into_iter()
                .filter(|volume| volume.name.as_deref() == Some(name))
                .collect()
        })
    }

    /// The project's volumes whose name starts with `prefix` (read from
    /// the whole listing: Cinder's "like" filters need a microversion and
    /// a resource filter not every cloud allows).
    pub async fn volumes_named_like(&self, prefix: &str) -> Result<Vec<Volume>> {
        let answer: Value = self
            .session
            .call(self.call(Call::get(Service::BlockStorage, "/volumes/detail")))
            .await?
            .json()?;
        volumes_of(answer).map(|volumes| {
            volumes
                .into_iter()
                .filter(|volume| {
                    volume
                        .name
                        .as_deref()
                        .is_some_and(|name| name.starts_with(prefix))
                })
                .collect()
        })
    }

    /// Changes the volume's type.
    pub async fn retype_volume(
        &self,
        id: &str,
        volume_type: &str,
        migration_policy: MigrationPolicy,
    ) -> Result<()> {
        self.action(
            id,
            json!({"os-retype": {"new_type": volume_type, "migration_policy": migration_policy.as_str()}}),
        )
        .await
    }

    /// Sets the volume's read-only access mode (the volume must not be
    /// attached).
    pub async fn set_volume_read_only(&self, id: &str, read_only: bool) -> Result<()> {
        self.action(
            id,
            json!({"os-update_readonly_flag": {"readonly": read_only}}),
        )
        .await
    }

    /// Restores `backup_id` into `target`; returns the id of the volume
    /// being restored.
    pub async fn restore_backup(&self, backup_id: &str, target: &RestoreTarget) -> Result<String> {
        let answer: Value = self
            .session
            .call(self.call(Call::post(
                Service::BlockStorage,
                format!("/backups/{}/restore", segment(backup_id)),
                target.body(),
            )))
            .await?
            .json()?;
        answer["restore"]["volume_id"]
            .as_str()
            .map(str::to_owned)
            .ok_or_else(|| Error::Decode {
                service: Service::BlockStorage,
                message: "the restore names no volume".to_owned(),
            })
    }

    async fn action(&self, id: &str, body: Value) -> Result<()> {
        self.session
            .call(self.call(Call::post(
                Service::BlockStorage,
                format!("/volumes/{}/action", segment(id)),
                body,
            )))
            .await?;
        Ok(())
    }

    /// The volume, or `None` when Cinder no longer has it.
    pub async fn volume(&self, id: &str) -> Result<Option<Volume>> {
        match self
            .session
            .call_found(self.call(Call::get(
                Service::BlockStorage,
                format!("/volumes/{}", segment(id)),
            )))
            .await?
        {
            Some(answer) => Ok(Some(volume_of(answer.json()?)?)),
            None => Ok(None),
        }
    }

    /// The project's volumes whose metadata has `key` = `value`.
    pub async fn volumes_with_metadata(&self, key: &str, value: &str) -> Result<Vec<Volume>> {
        let filter = json!({ key: value }).to_string();
        let answer: Value = self
            .session
            .call(self.call(
                Call::get(Service::BlockStorage, "/volumes/detail").query("metadata", filter),
            ))
            .await?
            .json()?;
        volumes_of(answer)
    }

    /// Changes name and description (`None` leaves one as it is).
    pub async fn update_volume(
        &self,
        id: &str,
        name: Option<&str>,
        description: Option<&str>,
    ) -> Result<()> {
        let mut body = Map::new();
        if let Some(name) = name {
            body.insert("name".to_owned(), json!(name));
        }
        if let Some(description) = description {
            body.insert("description".to_owned(), json!(description));
        }
        self.session
            .call(self.call(Call::put(
                Service::BlockStorage,
                format!("/volumes/{}", segment(id)),
                json!({ "volume": body }),
            )))
            .await?;
        Ok(())
    }

    /// Replaces the volume's metadata.
    pub async fn set_volume_metadata(
        &self,
        id: &str,
        metadata: &BTreeMap<String, String>,
    ) -> Result<()> {
        self.session
            .call(self.call(Call::put(
                Service::BlockStorage,
                format!("/volumes/{}/metadata", segment(id)),
                json!({ "metadata": metadata }),
            )))
            .await?;
        Ok(())
    }

    /// Grows the volume to `size` GiB.
    pub async fn extend_volume(&self, id: &str, size: u64) -> Result<()> {
        self.session
            .call(self.call(Call::post(
                Service::BlockStorage,
                format!("/volumes/{}/action", segment(id)),
                json!({"os-extend": {"new_size": size}}),
            )))
            .await?;
        Ok(())
    }

    /// Asks for the volume's deletion; one already gone is deleted.
    pub async fn delete_volume(&self, id: &str) -> Result<()> {
        self.session
            .call_removing(self.call(Call::delete(
                Service::BlockStorage,
                format!("/volumes/{}", segment(id)),
            )))
            .await
    }
}

/// The body of a volume create: only what is given, the scheduler hints
/// beside the volume (where Cinder reads them).
fn new_volume_body(volume: &NewVolume) -> Value {
    let mut body = Map::new();
    let mut put = |key: &str, value: Option<Value>| {
        if let Some(value) = value {
            body.insert(key.to_owned(), value);
        }
    };
    put("name", volume.name.clone().map(Value::String));
    put("description", volume.description.clone().map(Value::String));
    put("size", volume.size.map(|size| json!(size)));
    put("volume_type", volume.volume_type.clone().map(Value::String));
    put(
        "availability_zone",
        volume.availability_zone.clone().map(Value::String),
    );
    put("imageRef", volume.image_id.clone().map(Value::String));
    put("snapshot_id", volume.snapshot_id.clone().map(Value::String));
    put(
        "source_volid",
        volume.source_volume_id.clone().map(Value::String),
    );
    put("multiattach", volume.multiattach.map(Value::Bool));
    if !volume.metadata.is_empty() {
        body.insert("metadata".to_owned(), json!(volume.metadata));
    }
    let mut request = json!({ "volume": body });
    if !volume.scheduler_hints.is_empty() {
        request["OS-SCH-HNT:scheduler_hints"] = Value::Object(volume.scheduler_hints.clone());
    }
    request
}

fn volumes_of(answer: Value) -> Result<Vec<Volume>> {
    answer["volumes"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .into_iter()
        .map(|raw| volume_of(json!({ "volume": raw })))
        .collect()
}

fn volume_of(answer: Value) -> Result<Volume> {
    let raw = answer.get("volume").cloned().ok_or_else(|| Error::Decode {
        service: Service::BlockStorage,
        message: "no volume in the answer".to_owned(),
    })?;
    let mut volume: Volume =
        serde_json::from_value(raw.clone()).map_err(|error| Error::Decode {
            service: Service::BlockStorage,
            message: format!("a volume: {error}"),
        })?;
    volume.raw = raw;
    Ok(volume)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_create_sends_only_what_is_given_and_hints_beside_the_volume() {
        let volume = NewVolume {
            name: Some("data".to_owned()),
            size: Some(2),
            image_id: Some("img-1".to_owned()),
            metadata: [("ember_resource".to_owned(), "ember-1".to_owned())].into(),
            scheduler_hints: [("same_host".to_owned(), json!(["v1"]))]
                .into_iter()
                .collect(),
            ..NewVolume::default()
        };
        assert_eq!(
            new_volume_body(&volume),
            json!({
                "volume": {
                    "name": "data",
                    "size": 2,
                    "imageRef": "img-1",
                    "metadata": {"ember_resource": "ember-1"}
                },
                "OS-SCH-HNT:scheduler_hints": {"same_host": ["v1"]}
            })
        );
        assert_eq!(
            new_volume_body(&NewVolume::default()),
            json!({"volume": {}})
        );
    }

    #[test]
    fn a_restore_names_its_target() {
        assert_eq!(
            RestoreTarget::NewVolume {
                name: "ember-1".to_owned()
            }
            .body(),
            json!({"restore": {"name": "ember-1"}})
        );
        assert_eq!(
            RestoreTarget::Volume {
                volume_id: "v1".to_owned()
            }
            .body(),
            json!({"restore": {"volume_id": "v1"}})
        );
    }

    #[test]
    fn a_volume_keeps_what_cinder_said() {
        let raw = json!({
            "id": "v1", "name": "data", "status": "in-use", "size": 1,
            "attachments": [{"server_id": "s1", "attachment_id": "a1", "device": "/dev/vdb", "id": "v1"}],
            "metadata": {"ember_resource": "ember-1"}, "bootable": "false",
            "encrypted": false, "created_at": "2026-01-01T00:00:00.000000"
        });
        let volume = volume_of(json!({ "volume": raw.clone() })).expect("a volume");
        assert_eq!(volume.attachments[0].server_id, "s1");
        assert_eq!(volume.metadata["ember_resource"], "ember-1");
        assert_eq!(volume.raw, raw);
    }
}
