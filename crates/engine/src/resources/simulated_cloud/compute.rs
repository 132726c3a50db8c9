//! Key pairs, server groups and images on the simulated cloud: a key pair
//! given its public key or generated (a real Ed25519 pair, its private key
//! in OpenSSH's format, kept only when `save_private_key` says), a server
//! group with its policy, an image `active` at once and protected while a
//! stack's `level=all` lock holds it.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use ed25519_dalek::SigningKey;
use md5::{Digest, Md5};
use serde_json::{Map, Value, json};

use super::{Made, Make, made_id, texts};
use crate::cloud::simulated::{Kind, SimulatedCloud};
use crate::domain::Resource;
use crate::resources::ResourceFailure;

/// The resource data's mark of an image a lock protected.
const LOCKED: &str = "protected_by_lock";

/// `OS::Nova::KeyPair`: named as the template says; a name the same user
/// has already is refused, as Nova refuses it.
pub(super) fn key_pair(make: &mut Make<'_>) -> Result<Made, ResourceFailure> {
    let name = make
        .text("name")
        .ok_or_else(|| ResourceFailure::new("Property name not assigned".to_owned()))?;
    let id = make.id("keypair");
    let user = make
        .text("user")
        .unwrap_or_else(|| make.request.user_id.clone());
    let project = make.project().to_owned();
    let taken = make
        .world
        .list(&project, Kind::KeyPair, |pair| {
            pair.name() == name
                && pair.fields.get("user_id").and_then(Value::as_str) == Some(user.as_str())
        })
        .any(|pair| pair.id != id);
    if taken {
        return Err(ResourceFailure::new(format!(
            "Key pair '{name}' already exists."
        )));
    }
    let existing = make.existing(&id);
    let (public_key, private_key) = match (make.text("public_key"), &existing) {
        (Some(public_key), _) => (public_key, None),
        (None, Some(existing)) => (
            existing.fields["public_key"]
                .as_str()
                .unwrap_or_default()
                .to_owned(),
            existing.fields.get("private_key").cloned(),
        ),
        (None, None) => {
            let (public_key, private_key) = generate(&name);
            (public_key, Some(json!(private_key)))
        }
    };
    let fingerprint = fingerprint(&public_key)?;
    let mut fields = Map::new();
    fields.insert("name".to_owned(), json!(name));
    fields.insert("public_key".to_owned(), json!(public_key));
    fields.insert("fingerprint".to_owned(), json!(fingerprint));
    fields.insert(
        "type".to_owned(),
        json!(make.text("type").unwrap_or_else(|| "ssh".to_owned())),
    );
    fields.insert("user_id".to_owned(), json!(user));
    let mut stored = fields.clone();
    if let Some(private_key) = &private_key {
        stored.insert("private_key".to_owned(), private_key.clone());
    }
    make.insert(&id, Kind::KeyPair, stored);
    let mut attributes = fields.clone();
    let saved = make.flag("save_private_key") == Some(true);
    attributes.insert(
        "private_key".to_owned(),
        match private_key {
            Some(private_key) if saved => private_key,
            _ => json!(""),
        },
    );
    Ok(Made {
        physical_id: name,
        attributes,
        fields,
        data: Map::new(),
    }
    .with_data("object_id", json!(id)))
}

/// A new Ed25519 key pair: the public key as `authorized_keys` has it, the
/// private key in OpenSSH's own format.
fn generate(comment: &str) -> (String, String) {
    let seed: [u8; 32] = rand::random();
    let signing = SigningKey::from_bytes(&seed);
    let public = signing.verifying_key().to_bytes();
    let mut public_blob = Vec::new();
    put_string(&mut public_blob, b"ssh-ed25519");
    put_string(&mut public_blob, &public);
    let public_key = format!("ssh-ed25519 {} {comment}", STANDARD.encode(&public_blob));

    let check: u32 = rand::random();
    let mut private = Vec::new();
    private.extend_from_slice(&check.to_be_bytes());
    private.extend_from_slice(&check.to_be_bytes());
    put_string(&mut private, b"ssh-ed25519");
    put_string(&mut private, &public);
    let mut pair = seed.to_vec();
    pair.extend_from_slice(&public);
    put_string(&mut private, &pair);
    put_string(&mut private, comment.as_bytes());
    let mut pad = 1_u8;
    while private.len() % 8 != 0 {
        private.push(pad);
        pad += 1;
    }
    let mut blob = b"openssh-key-v1\0".to_vec();
    put_string(&mut blob, b"none");
    put_string(&mut blob, b"none");
    put_string(&mut blob, b"");
    blob.extend_from_slice(&1_u32.to_be_bytes());
    put_string(&mut blob, &public_blob);
    put_string(&mut blob, &private);
    let encoded = STANDARD.encode(&blob);
    let mut private_key = String::from("-----BEGIN OPENSSH PRIVATE KEY-----\n");
    for line in encoded.as_bytes().chunks(70) {
        private_key.push_str(std::str::from_utf8(line).unwrap_or_default());
        private_key.push('\n');
    }
    private_key.push_str("-----END OPENSSH PRIVATE KEY-----\n");
    (public_key, private_key)
}

fn put_string(buffer: &mut Vec<u8>, bytes: &[u8]) {
    let length = u32::try_from(bytes.len()).unwrap_or(u32::MAX);
    buffer.extend_from_slice(&length.to_be_bytes());
    buffer.extend_from_slice(bytes);
}

/// Nova's fingerprint of a public key: the MD5 of its key blob, in pairs
/// of hex digits. A key that is not `<type> <base64>` is refused.
fn fingerprint(public_key: &str) -> Result<String, ResourceFailure> {
    let invalid = || {
        ResourceFailure::new("Keypair data is invalid: failed to generate fingerprint".to_owned())
    };
    let blob = public_key.split_whitespace().nth(1).ok_or_else(invalid)?;
    let bytes = STANDARD.decode(blob).map_err(|_| invalid())?;
    let digest = Md5::digest(&bytes);
    Ok(digest
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect::<Vec<_>>()
        .join(":"))
}

/// `OS::Nova::ServerGroup`.
pub(super) fn server_group(make: &mut Make<'_>) -> Result<Made, ResourceFailure> {
    let id = make.id("server_group");
    let existing = make.existing(&id);
    let policies = texts(make.properties(), "policies");
    let policies = if policies.is_empty() {
        vec!["anti-affinity".to_owned()]
    } else {
        policies
    };
    let name = make.name("name", existing.as_ref());
    let mut fields = Map::new();
    fields.insert("id".to_owned(), json!(id));
    fields.insert("name".to_owned(), json!(name));
    fields.insert("policy".to_owned(), json!(policies[0]));
    fields.insert("policies".to_owned(), json!(policies));
    fields.insert(
        "rules".to_owned(),
        make.properties()
            .get("rules")
            .filter(|rules| !rules.is_null())
            .cloned()
            .unwrap_or(json!({})),
    );
    fields.insert(
        "members".to_owned(),
        existing
            .as_ref()
            .and_then(|existing| existing.fields.get("members").cloned())
            .unwrap_or(json!([])),
    );
    fields.insert("project_id".to_owned(), json!(make.project()));
    fields.insert("user_id".to_owned(), json!(make.request.user_id));
    make.insert(&id, Kind::ServerGroup, fields.clone());
    Ok(Made::object(&id, fields))
}

/// `OS::Glance::WebImage`: `active` at once (nothing is downloaded); its
/// id is the template's `id` when it gives one.
pub(super) fn image(make: &mut Make<'_>) -> Result<Made, ResourceFailure> {
    let id = make.text("id").unwrap_or_else(|| make.id("image"));
    if make.current.is_none()
        && let Some(other) = make.world.get_any(&id)
        && other.project != make.project()
    {
        return Err(ResourceFailure::new(format!(
            "Conflict: An image with identifier {id} already exists"
        )));
    }
    let existing = make.existing(&id);
    let mut fields = Map::new();
    fields.insert("id".to_owned(), json!(id));
    fields.insert(
        "name".to_owned(),
        json!(make.name("name", existing.as_ref())),
    );
    fields.insert("status".to_owned(), json!("active"));
    fields.insert("owner".to_owned(), json!(make.project()));
    for (key, default) in [
        ("disk_format", Value::Null),
        ("container_format", Value::Null),
        ("min_disk", json!(0)),
        ("min_ram", json!(0)),
        ("protected", json!(false)),
        ("visibility", json!("private")),
        ("tags", json!([])),
        ("architecture", Value::Null),
        ("kernel_id", Value::Null),
        ("ramdisk_id", Value::Null),
        ("os_distro", Value::Null),
        ("os_version", Value::Null),
    ] {
        fields.insert(
            key.to_owned(),
            make.properties()
                .get(key)
                .filter(|value| !value.is_null())
                .cloned()
                .unwrap_or(default),
        );
    }
    if let Some(location) = make.text("location") {
        fields.insert("direct_url".to_owned(), json!(location));
    }
    if let Some(extra) = make
        .properties()
        .get("extra_properties")
        .and_then(Value::as_object)
    {
        fields.extend(extra.clone());
    }
    // A lock's protection outlives an update.
    let locked = make
        .current
        .is_some_and(|current| current.data.get(LOCKED) == Some(&json!(true)));
    if locked {
        fields.insert("protected".to_owned(), json!(true));
    }
    make.insert(&id, Kind::Image, fields.clone());
    Ok(Made::object(&id, fields))
}

/// A stack's `level=all` lock protects the image (unlock lifts exactly
/// what the lock set: an image the template protected stays protected).
pub(super) fn protect(
    cloud: &SimulatedCloud,
    current: &Resource,
    lock: bool,
) -> Result<Value, ResourceFailure> {
    let Some(id) = made_id(current) else {
        return Ok(current.data.clone());
    };
    let by_template = current.properties.get("protected") == Some(&json!(true));
    cloud.with(|world| {
        if let Some(fields) = world.fields_mut(&id) {
            fields.insert("protected".to_owned(), json!(lock || by_template));
        }
    });
    let mut data = current.data.as_object().cloned().unwrap_or_default();
    if lock {
        data.insert(LOCKED.to_owned(), json!(true));
    } else {
        data.remove(LOCKED);
    }
    Ok(Value::Object(data))
}
