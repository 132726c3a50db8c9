//! Cinder's volume types (an admin's by default policy): made public or
//! private with the projects that may use them, their extra specs, and
//! the encryption specification a type may carry.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::{Map, Value, json};

use super::Cinder;
use crate::error::{Error, Result, Service};
use crate::session::{Call, segment};

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub struct VolumeType {
    pub id: String,
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub description: Option<String>,
    #[serde(default)]
    pub is_public: bool,
    #[serde(default)]
    pub extra_specs: BTreeMap<String, String>,
    /// Everything Cinder said.
    #[serde(skip)]
    pub raw: Value,
}

/// A volume type to make, or the fields of one to change (`None` leaves
/// a field as it is).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct VolumeTypeFields {
    pub name: Option<String>,
    pub description: Option<String>,
    pub is_public: Option<bool>,
}

/// A volume type's encryption: how Nova (`front-end`) or the backend
/// (`back-end`) encrypts its volumes.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub struct Encryption {
    #[serde(default)]
    pub encryption_id: Option<String>,
    #[serde(default)]
    pub volume_type_id: String,
    #[serde(default)]
    pub provider: Option<String>,
    #[serde(default)]
    pub control_location: Option<String>,
    #[serde(default)]
    pub cipher: Option<String>,
    #[serde(default)]
    pub key_size: Option<u64>,
    #[serde(skip)]
    pub raw: Value,
}

impl Cinder {
    /// Makes a volume type with its extra specs.
    pub async fn create_volume_type(
        &self,
        fields: &VolumeTypeFields,
        extra_specs: &BTreeMap<String, String>,
    ) -> Result<VolumeType> {
        let mut body = type_body(fields, Request::Create);
        if !extra_specs.is_empty() {
            body.insert("extra_specs".to_owned(), json!(extra_specs));
        }
        let answer = self
            .session
            .call(self.call(Call::post(
                Service::BlockStorage,
                "/types",
                json!({ "volume_type": body }),
            )))
            .await?;
        volume_type_of(answer.json()?)
    }

    /// The volume type `id`, or `None` when Cinder has none.
    pub async fn volume_type(&self, id: &str) -> Result<Option<VolumeType>> {
        match self
            .session
            .call_found(self.call(Call::get(
                Service::BlockStorage,
                format!("/types/{}", segment(id)),
            )))
            .await?
        {
            Some(answer) => Ok(Some(volume_type_of(answer.json()?)?)),
            None => Ok(None),
        }
    }

    /// Every volume type the caller sees, public and private.
    pub async fn volume_types(&self) -> Result<Vec<VolumeType>> {
        let answer: Value = self
            .session
            .call(self.call(Call::get(Service::BlockStorage, "/types").query("is_public", "None")))
            .await?
            .json()?;
        answer["volume_types"]
            .as_array()
            .cloned()
            .unwrap_or_default()
            .into_iter()
            .map(|raw| volume_type_of(json!({ "volume_type": raw })))
            .collect()
    }

    /// The type named or identified by `name_or_id`, as Cinder's clients
    /// find one: an id first, then a name.
    pub async fn find_volume_type(&self, name_or_id: &str) -> Result<Option<VolumeType>> {
        if let Some(found) = self.volume_type(name_or_id).await? {
            return Ok(Some(found));
        }
        Ok(self
            .volume_types()
            .await?
            .into_iter()
            .find(|volume_type| volume_type.name == name_or_id))
    }

    /// Changes the given fields of the type.
    pub async fn update_volume_type(&self, id: &str, fields: &VolumeTypeFields) -> Result<()> {
        self.session
            .call(self.call(Call::put(
                Service::BlockStorage,
                format!("/types/{}", segment(id)),
                json!({ "volume_type": type_body(fields, Request::Update) }),
            )))
            .await?;
        Ok(())
    }

    /// Sets (adds or changes) extra specs.
    pub async fn set_extra_specs(&self, id: &str, specs: &BTreeMap<String, String>) -> Result<()> {
        if specs.is_empty() {
            return Ok(());
        }
        self.session
            .call(self.call(Call::post(
                Service::BlockStorage,
                format!("/types/{}/extra_specs", segment(id)),
                json!({ "extra_specs": specs }),
            )))
            .await?;
        Ok(())
    }

    /// Removes one extra spec; one already gone is removed.
    pub async fn unset_extra_spec(&self, id: &str, key: &str) -> Result<()> {
        self.session
            .call_removing(self.call(Call::delete(
                Service::BlockStorage,
                format!("/types/{}/extra_specs/{}", segment(id), segment(key)),
            )))
            .await
    }

    /// The projects a private type is shared with.
    pub async fn type_access(&self, id: &str) -> Result<Vec<String>> {
        let answer: Value = self
            .session
            .call(self.call(Call::get(
                Service::BlockStorage,
                format!("/types/{}/os-volume-type-access", segment(id)),
            )))
            .await?
            .json()?;
        Ok(answer["volume_type_access"]
            .as_array()
            .map(|entries| {
                entries
                    .iter()
                    .filter_map(|entry| entry["project_id"].as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default())
    }

    /// Lets `project_id` use the private type (`granted`), or stops it.
    pub async fn set_type_access(&self, id: &str, project_id: &str, granted: bool) -> Result<()> {
        let action = if granted {
            "addProjectAccess"
        } else {
            "removeProjectAccess"
        };
        self.session
            .call(self.call(Call::post(
                Service::BlockStorage,
                format!("/types/{}/action", segment(id)),
                json!({ action: { "project": project_id } }),
            )))
            .await?;
        Ok(())
    }

    /// Deletes the type; one already gone is deleted.
    pub async fn delete_volume_type(&self, id: &str) -> Result<()> {
        self.session
            .call_removing(self.call(Call::delete(
                Service::BlockStorage,
                format!("/types/{}", segment(id)),
            )))
            .await
    }

    /// The type's encryption, or `None` when it has none.
    pub async fn encryption(&self, type_id: &str) -> Result<Option<Encryption>> {
        let Some(answer) = self
            .session
            .call_found(self.call(Call::get(
                Service::BlockStorage,
                format!("/types/{}/encryption", segment(type_id)),
            )))
            .await?
        else {
            return Ok(None);
        };
        let raw: Value = answer.json()?;
        // A type without encryption answers `{}`.
        if raw.as_object().is_none_or(|fields| {
            fields.is_empty() || fields.get("provider").is_none_or(Value::is_null)
        }) {
            return Ok(None);
        }
        encryption_of(raw).map(Some)
    }

    /// Gives the type an encryption.
    pub async fn create_encryption(&self, type_id: &str, spec: &Map<String, Value>) -> Result<()> {
        self.session
            .call(self.call(Call::post(
                Service::BlockStorage,
                format!("/types/{}/encryption", segment(type_id)),
                json!({ "encryption": spec }),
            )))
            .await?;
        Ok(())
    }

    /// Changes the given fields of the type's encryption.
    pub async fn update_encryption(
        &self,
        type_id: &str,
        encryption_id: &str,
        spec: &Map<String, Value>,
    ) -> Result<()> {
        self.session
            .call(self.call(Call::put(
                Service::BlockStorage,
                format!(
                    "/types/{}/encryption/{}",
                    segment(type_id),
                    segment(encryption_id)
                ),
                json!({ "encryption": spec }),
            )))
            .await?;
        Ok(())
    }

    /// Takes the type's encryption away; none left is success.
    pub async fn delete_encryption(&self, type_id: &str, encryption_id: &str) -> Result<()> {
        self.session
            .call_removing(self.call(Call::delete(
                Service::BlockStorage,
                format!(
                    "/types/{}/encryption/{}",
                    segment(type_id),
                    segment(encryption_id)
                ),
            )))
            .await
    }
}

/// Which request a type's body is for: Cinder's schemas name
/// `is_public` differently in each, and refuse the other's name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Request {
    Create,
    Update,
}

/// The body's type fields: only what is given.
fn type_body(fields: &VolumeTypeFields, request: Request) -> Map<String, Value> {
    let mut body = Map::new();
    if let Some(name) = &fields.name {
        body.insert("name".to_owned(), json!(name));
    }
    if let Some(description) = &fields.description {
        body.insert("description".to_owned(), json!(description));
    }
    if let Some(is_public) = fields.is_public {
        let key = match request {
            Request::Create => "os-volume-type-access:is_public",
            Request::Update => "is_public",
        };
        body.insert(key.to_owned(), json!(is_public));
    }
    body
}

fn volume_type_of(answer: Value) -> Result<VolumeType> {
    let raw = answer
        .get("volume_type")
        .cloned()
        .ok_or_else(|| Error::Decode {
            service: Service::BlockStorage,
            message: "no volume_type in the answer".to_owned(),
        })?;
    let mut volume_type: VolumeType =
        serde_json::from_value(raw.clone()).map_err(|error| Error::Decode {
            service: Service::BlockStorage,
            message: format!("a volume type: {error}"),
        })?;
    if let Some(public) = raw
        .get("os-volume-type-access:is_public")
        .and_then(Value::as_bool)
    {
        volume_type.is_public = public;
    }
    volume_type.raw = raw;
    Ok(volume_type)
}

fn encryption_of(raw: Value) -> Result<Encryption> {
    let mut encryption: Encryption =
        serde_json::from_value(raw.clone()).map_err(|error| Error::Decode {
            service: Service::BlockStorage,
            message: format!("a volume type's encryption: {error}"),
        })?;
    encryption.raw = raw;
    Ok(encryption)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_type_body_holds_only_what_is_given_under_its_requests_names() {
        let private = VolumeTypeFields {
            name: Some("gold".to_owned()),
            is_public: Some(false),
            ..VolumeTypeFields::default()
        };
        assert_eq!(
            Value::Object(type_body(&private, Request::Create)),
            json!({"name": "gold", "os-volume-type-access:is_public": false})
        );
        assert_eq!(
            Value::Object(type_body(&private, Request::Update)),
            json!({"name": "gold", "is_public": false})
        );
        assert_eq!(
            Value::Object(type_body(&VolumeTypeFields::default(), Request::Update)),
            json!({})
        );
    }

    #[test]
    fn a_private_type_is_read_as_private() {
        let volume_type = volume_type_of(json!({"volume_type": {
            "id": "t1", "name": "gold", "description": null,
            "os-volume-type-access:is_public": false, "is_public": false,
            "extra_specs": {"volume_backend_name": "lvm"}
        }}))
        .expect("a type");
        assert!(!volume_type.is_public);
        assert_eq!(volume_type.extra_specs["volume_backend_name"], "lvm");
    }

    #[test]
    fn an_encryption_keeps_its_fields() {
        let encryption = encryption_of(json!({
            "volume_type_id": "t1", "encryption_id": "e1", "provider": "luks",
            "control_location": "front-end", "cipher": "aes-xts-plain64", "key_size": 256
        }))
        .expect("an encryption");
        assert_eq!(encryption.key_size, Some(256));
        assert_eq!(encryption.encryption_id.as_deref(), Some("e1"));
    }
}
