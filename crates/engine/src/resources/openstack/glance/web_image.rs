//! `OS::Glance::WebImage`: an image Glance makes and fills itself from a
//! URL (the `web-download` import), waited for until `active` (or, with
//! `active: false`, deactivated once active), as Heat's.
//!
//! The image's id is the `id` property, or one derived from the row, and
//! the image carries the row's marker as a property (`ember_resource`):
//! a create that runs again finds the image by its id and adopts it when
//! the marker is the row's (an image of that id without it is someone
//! else's, and Glance's conflict stands); a delete of a row that recorded
//! no image deletes the image of that id only if it carries the marker.
//!
//! A stack lock at level `all` protects the image (Glance refuses to
//! delete a protected image) unless it is protected already, and records
//! in the row's private data that the lock did it: the unlock unprotects
//! only an image the lock protected, so one the template protects stays
//! protected. Deleting a protected image fails with Glance's message, as
//! in Heat.

use async_trait::async_trait;
use ember_openstack::glance::{Glance, Image, ImageChange};
use serde_json::{Map, Value, json};

use super::super::heat::changed_properties;
use super::super::{Cloud, failure, physical_id, text};
use super::image_spec::{
    MARKER_KEY, check, difference, extra_properties, field_changes, new_image, schema, strings,
};
use super::import::wait_imported;
use crate::domain::{LockLevel, Resource, StackAction};
use crate::resources::{
    LockRequest, ResourceFailure, ResourceOutcome, ResourceRequest, ResourceType,
    ResourceTypeSchema,
};

/// What the image id and the marker derive from.
const IMAGE_KIND: &str = "image";

/// Private-data key: the stack's lock protected the image.
const LOCKED_BY_STACK: &str = "protected_by_stack_lock";

pub struct WebImageResource {
    schema: ResourceTypeSchema,
    cloud: Cloud,
}

/// Whether the image is the one the row with `marker` made.
fn made_by(image: &Image, marker: &str) -> bool {
    image.raw.get(MARKER_KEY).and_then(Value::as_str) == Some(marker)
}

/// Whether the row's data says the stack's lock protected the image.
fn protected_by_lock(data: &Value) -> bool {
    data.get(LOCKED_BY_STACK) == Some(&Value::Bool(true))
}

/// `data` with the lock's flag set or cleared.
fn with_lock_flag(data: &Value, protected: bool) -> Value {
    let mut map = data.as_object().cloned().unwrap_or_default();
    if protected {
        map.insert(LOCKED_BY_STACK.to_owned(), Value::Bool(true));
    } else {
        map.remove(LOCKED_BY_STACK);
    }
    Value::Object(map)
}

impl WebImageResource {
    pub fn new(cloud: Cloud) -> WebImageResource {
        WebImageResource {
            schema: schema(),
            cloud,
        }
    }

    async fn glance(&self, stack_id: uuid::Uuid) -> Result<Glance, ResourceFailure> {
        let session = self.cloud.session(stack_id).await?;
        Ok(Glance::new(&session))
    }

    /// The image the row made: the recorded one, or (none recorded) the
    /// one of its id that carries its marker.
    async fn image_of(
        &self,
        glance: &Glance,
        current: &Resource,
    ) -> Result<Option<Image>, ResourceFailure> {
        if let Some(image_id) = physical_id(current) {
            return glance.image(image_id).await.map_err(failure);
        }
        let image_id = current
            .properties
            .as_object()
            .and_then(|properties| text(properties, "id"))
            .unwrap_or_else(|| {
                crate::resources::derived_id(current.stack_id, current.id, IMAGE_KIND).to_string()
            });
        let marker = Cloud::marker_of(current, IMAGE_KIND);
        Ok(glance
            .image(&image_id)
            .await
            .map_err(failure)?
            .filter(|image| made_by(image, &marker)))
    }

    /// Makes the image record, or adopts the one an earlier attempt made.
    async fn made(
        glance: &Glance,
        properties: &Map<String, Value>,
        image_id: &str,
        marker: &str,
    ) -> Result<Image, ResourceFailure> {
        if let Some(existing) = glance.image(image_id).await.map_err(failure)?
            && made_by(&existing, marker)
        {
            return Ok(existing);
        }
        match glance
            .create_image(&new_image(properties, image_id, marker))
            .await
        {
            Ok(image) => Ok(image),
            Err(error) if error.is_conflict() => {
                match glance.image(image_id).await.map_err(failure)? {
                    Some(existing) if made_by(&existing, marker) => Ok(existing),
                    _ => Err(failure(error)),
                }
            }
            Err(error) => Err(failure(error)),
        }
    }
}

#[async_trait]
impl ResourceType for WebImageResource {
    fn schema(&self) -> &ResourceTypeSchema {
        &self.schema
    }

    async fn create(&self, request: &ResourceRequest) -> Result<ResourceOutcome, ResourceFailure> {
        let properties = &request.properties;
        check(properties)?;
        let location = text(properties, "location").ok_or_else(|| {
            ResourceFailure::new("location: Property location not assigned".to_owned())
        })?;
        let image_id =
            text(properties, "id").unwrap_or_else(|| request.derived_id(IMAGE_KIND).to_string());
        let marker = Cloud::marker(request, IMAGE_KIND);
        let glance = self.glance(request.stack_id).await?;
        let image = Self::made(&glance, properties, &image_id, &marker).await?;
        // Members and extra properties before the import: the import task
        // saves the image it loaded when it began, over changes made while
        // it runs.
        for member in strings(properties.get("members")) {
            glance
                .add_image_member(&image_id, &member)
                .await
                .map_err(failure)?;
        }
        let extra = extra_properties(properties);
        if !extra.is_empty() {
            glance
                .change_image(&image_id, &extra)
                .await
                .map_err(failure)?;
        }
        // Only an image without data is imported into (a failed import
        // leaves it so too); one importing or imported is waited for.
        if image.status == "queued"
            && let Err(error) = glance.import_from_url(&image_id, &location).await
        {
            let started_meanwhile = error.is_conflict()
                && glance
                    .image(&image_id)
                    .await
                    .map_err(failure)?
                    .is_some_and(|image| image.status != "queued");
            if !started_meanwhile {
                return Err(failure(error));
            }
        }
        let active = properties
            .get("active")
            .and_then(Value::as_bool)
            .unwrap_or(true);
        let image = wait_imported(&glance, &image_id, &location, active).await?;
        Ok(ResourceOutcome {
            physical_id: image_id,
            attributes: image.raw.as_object().cloned().unwrap_or_default(),
            data: json!({}),
        })
    }

    async fn update(
        &self,
        request: &ResourceRequest,
        current: &Resource,
    ) -> Result<ResourceOutcome, ResourceFailure> {
        check(&request.properties)?;
        let image_id = physical_id(current)
            .ok_or_else(|| ResourceFailure::new("the image was never made".to_owned()))?
            .to_owned();
        let old = current.properties.as_object().cloned().unwrap_or_default();
        let new = &request.properties;
        let changed = changed_properties(&self.schema, current, request);
        let glance = self.glance(request.stack_id).await?;
        let active = new.get("active").and_then(Value::as_bool).unwrap_or(true);
        if changed.contains(&"active") && !active {
            glance.deactivate_image(&image_id).await.map_err(failure)?;
        }
        let (added, removed) = difference(&strings(old.get("tags")), &strings(new.get("tags")));
        for tag in added {
            glance
                .add_image_tag(&image_id, &tag)
                .await
                .map_err(failure)?;
        }
        for tag in removed {
            glance
                .remove_image_tag(&image_id, &tag)
                .await
                .map_err(failure)?;
        }
        let mut data = current.data.clone();
        let protect = new
            .get("protected")
            .and_then(Value::as_bool)
            .unwrap_or(false);
        let image = glance
            .image(&image_id)
            .await
            .map_err(failure)?
            .ok_or_else(|| ResourceFailure::new(format!("No image found with ID {image_id}")))?;
        // Glance refuses to remove a field the image does not have (one
        // removed by hand, or an import that never got that far).
        let mut changes: Vec<ImageChange> = field_changes(&old, new)
            .into_iter()
            .filter(|change| match change {
                ImageChange::Remove(field) => image.raw.get(field).is_some(),
                ImageChange::Set(..) => true,
            })
            .collect();
        if protect {
            // The template protects it now: an unlock must leave it so.
            data = with_lock_flag(&data, false);
        } else if protected_by_lock(&data) {
            // Still locked: the lock's protection holds until the unlock.
            changes.retain(
                |change| !matches!(change, ImageChange::Set(field, _) if field == "protected"),
            );
        }
        if !changes.is_empty() {
            glance
                .change_image(&image_id, &changes)
                .await
                .map_err(failure)?;
        }
        let (added, removed) =
            difference(&strings(old.get("members")), &strings(new.get("members")));
        for member in added {
            glance
                .add_image_member(&image_id, &member)
                .await
                .map_err(failure)?;
        }
        for member in removed {
            glance
                .remove_image_member(&image_id, &member)
                .await
                .map_err(failure)?;
        }
        if changed.contains(&"active") && active {
            glance.reactivate_image(&image_id).await.map_err(failure)?;
        }
        let image = glance
            .image(&image_id)
            .await
            .map_err(failure)?
            .ok_or_else(|| ResourceFailure::new(format!("No image found with ID {image_id}")))?;
        Ok(ResourceOutcome {
            physical_id: image_id,
            attributes: image.raw.as_object().cloned().unwrap_or_default(),
            data,
        })
    }

    async fn delete(&self, current: &Resource) -> Result<(), ResourceFailure> {
        let glance = self.glance(current.stack_id).await?;
        let Some(image) = self.image_of(&glance, current).await? else {
            return Ok(());
        };
        glance.delete_image(&image.id).await.map_err(failure)?;
        let image_id = image.id.as_str();
        let glance = &glance;
        Cloud::wait_for(&format!("image {image_id} deleted"), || async move {
            Ok(match glance.image(image_id).await.map_err(failure)? {
                Some(image) if image.status != "deleted" => None,
                _ => Some(()),
            })
        })
        .await
    }

    /// Every step finds what an earlier attempt did: the image by its id
    /// and marker, an update by setting what it asks.
    fn take_over(&self, step: StackAction) -> Result<(), String> {
        let _ = step;
        Ok(())
    }

    fn has_lock_handler(&self) -> bool {
        true
    }

    async fn lock(
        &self,
        current: &Resource,
        request: &LockRequest,
    ) -> Result<Value, ResourceFailure> {
        if request.level != LockLevel::All {
            return Ok(current.data.clone());
        }
        let Some(image_id) = physical_id(current) else {
            return Ok(current.data.clone());
        };
        let glance = self.glance(current.stack_id).await?;
        match glance.image(image_id).await.map_err(failure)? {
            // Protected already: by the template, or by this lock before.
            None => Ok(current.data.clone()),
            Some(image) if image.protected => Ok(current.data.clone()),
            Some(_) => {
                glance
                    .update_image(image_id, &[("protected", json!(true))])
                    .await
                    .map_err(failure)?;
                Ok(with_lock_flag(&current.data, true))
            }
        }
    }

    async fn unlock(
        &self,
        current: &Resource,
        request: &LockRequest,
    ) -> Result<Value, ResourceFailure> {
        let _ = request;
        let (Some(image_id), true) = (physical_id(current), protected_by_lock(&current.data))
        else {
            return Ok(current.data.clone());
        };
        let glance = self.glance(current.stack_id).await?;
        if glance.image(image_id).await.map_err(failure)?.is_some() {
            glance
                .update_image(image_id, &[("protected", json!(false))])
                .await
                .map_err(failure)?;
        }
        Ok(with_lock_flag(&current.data, false))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_lock_flag_is_set_and_cleared_alone() {
        let data = json!({"other": 1});
        let locked = with_lock_flag(&data, true);
        assert!(protected_by_lock(&locked));
        assert_eq!(locked["other"], json!(1));
        let unlocked = with_lock_flag(&locked, false);
        assert!(!protected_by_lock(&unlocked));
        assert_eq!(unlocked, data);
        assert!(!protected_by_lock(&Value::Null));
        assert!(protected_by_lock(&with_lock_flag(&Value::Null, true)));
    }

    #[test]
    fn only_the_rows_marker_makes_an_image_its() {
        let image = Image {
            id: "i1".to_owned(),
            raw: json!({"id": "i1", "ember_resource": "ember-1"}),
            ..Image::default()
        };
        assert!(made_by(&image, "ember-1"));
        assert!(!made_by(&image, "ember-2"));
        assert!(!made_by(&Image::default(), "ember-1"));
    }
}
