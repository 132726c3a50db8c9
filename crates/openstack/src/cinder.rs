//! Cinder (block storage): volumes — made, read, grown, renamed and
//! deleted. A volume Ember makes carries Ember's id in its metadata, which
//! Cinder filters on, so a create that is tried again finds it. Attaching
//! a volume to a server is asked of Nova ([`crate::nova::Nova::attach_volume`]),
//! as Heat does.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::{Map, Value, json};

use crate::error::{Error, Result, Service};
use crate::microversion::Microversion;
use crate::session::{Call, Session, segment};

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

    fn call(&self, call: Call) -> Call {
        call.microversion(self.version)
    }

    pub async fn create_volume(&self, volume: &NewVolume) -> Result<Volume> {
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
        let answer = self
            .session
            .call(self.call(Call::post(
                Service::BlockStorage,
                "/volumes",
                json!({ "volume": body }),
            )))
            .await?;
        volume_of(answer.json()?)
    }

    /// The volume, or `None` when Cinder no longer has it.
    pub async fn volume(&self, id: &str) -> Result<Option<Volume>> {
        match self
            .session
            .call(self.call(Call::get(
                Service::BlockStorage,
                format!("/volumes/{}", segment(id)),
            )))
            .await
        {
            Ok(answer) => Ok(Some(volume_of(answer.json()?)?)),
            Err(error) if error.is_not_found() => Ok(None),
            Err(error) => Err(error),
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
        answer["volumes"]
            .as_array()
            .cloned()
            .unwrap_or_default()
            .into_iter()
            .map(|raw| volume_of(json!({ "volume": raw })))
            .collect()
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
        match self
            .session
            .call(self.call(Call::delete(
                Service::BlockStorage,
                format!("/volumes/{}", segment(id)),
            )))
            .await
        {
            Ok(_) => Ok(()),
            Err(error) if error.is_not_found() => Ok(()),
            Err(error) => Err(error),
        }
    }
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
