//! Glance (image): images by id or name, and images Ember makes — with the
//! id Ember chooses (Glance takes it), so a create that is tried again
//! finds the image instead of making a second — filled by Glance itself
//! from a URL (`web-download` import), changed (fields, tags, members,
//! deactivated and reactivated), protected and unprotected for maintenance
//! locks, and deleted.

use serde::Deserialize;
use serde_json::{Value, json};

use crate::error::{ApiError, Error, Result, Service};
use crate::session::{Call, Session, segment};

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub struct Image {
    pub id: String,
    #[serde(default)]
    pub name: Option<String>,
    /// queued, saving, uploading, importing, active, killed, deleted, …
    #[serde(default)]
    pub status: String,
    #[serde(default)]
    pub protected: bool,
    #[serde(default)]
    pub visibility: Option<String>,
    #[serde(default)]
    pub tags: Vec<String>,
    #[serde(default)]
    pub size: Option<u64>,
    #[serde(default)]
    pub min_disk: Option<u64>,
    #[serde(default)]
    pub min_ram: Option<u64>,
    #[serde(default)]
    pub owner: Option<String>,
    /// Everything Glance said, for the `show` attribute.
    #[serde(skip)]
    pub raw: Value,
}

/// An image to make; `properties` are its other fields (`disk_format`,
/// `container_format`, `min_disk`, `visibility`, `os_distro`, …).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct NewImage {
    pub id: String,
    pub name: Option<String>,
    pub tags: Vec<String>,
    pub properties: serde_json::Map<String, Value>,
}

/// One change of an image's fields (a JSON patch operation in Glance's
/// `openstack-images-v2.1-json-patch` form, where `add` sets a field
/// whether or not it exists).
#[derive(Debug, Clone, PartialEq)]
pub enum ImageChange {
    Set(String, Value),
    Remove(String),
}

impl ImageChange {
    fn operation(&self) -> Value {
        match self {
            ImageChange::Set(field, value) => {
                json!({"op": "add", "path": format!("/{field}"), "value": value})
            }
            ImageChange::Remove(field) => json!({"op": "remove", "path": format!("/{field}")}),
        }
    }
}

/// Glance, through one session.
#[derive(Debug, Clone)]
pub struct Glance {
    session: Session,
}

impl Glance {
    pub fn new(session: &Session) -> Glance {
        Glance {
            session: session.clone(),
        }
    }

    /// The image, or `None` when Glance does not have it (or hides it).
    pub async fn image(&self, id: &str) -> Result<Option<Image>> {
        match self
            .session
            .call_found(Call::get(
                Service::Image,
                format!("/images/{}", segment(id)),
            ))
            .await?
        {
            Some(answer) => Ok(Some(image_of(answer.json()?)?)),
            None => Ok(None),
        }
    }

    /// The image `name_or_id` names: by id, else the one image of that
    /// name (none or several is an error naming it).
    /// The id of the image `name_or_id` names (see [`Glance::find_image`]),
    /// remembered for a minute (see [`Session::remembered_id`]).
    pub async fn image_id(&self, name_or_id: &str) -> Result<String> {
        self.session
            .remembered_id("images", name_or_id, || async {
                Ok(self.find_image(name_or_id).await?.id)
            })
            .await
    }

    pub async fn find_image(&self, name_or_id: &str) -> Result<Image> {
        if uuid::Uuid::parse_str(name_or_id).is_ok()
            && let Some(image) = self.image(name_or_id).await?
        {
            return Ok(image);
        }
        let answer: Value = self
            .session
            .call(Call::get(Service::Image, "/images").query("name", name_or_id))
            .await?
            .json()?;
        let images = answer["images"].as_array().cloned().unwrap_or_default();
        let not_found = |status: u16, message: String| {
            Error::Api(ApiError {
                service: Service::Image,
                method: "GET".to_owned(),
                path: "/images".to_owned(),
                status,
                message,
                request_id: None,
            })
        };
        match images.as_slice() {
            [one] => image_of(json!(one)),
            [] => Err(not_found(
                404,
                format!("No image found with name or ID '{name_or_id}'"),
            )),
            _ => Err(not_found(
                409,
                format!(
                    "Multiple images found with name '{name_or_id}', use an ID to be more specific"
                ),
            )),
        }
    }

    /// Makes the image record (queued, no data yet). Glance refuses a
    /// second create of one id with 409: the caller reads the image then.
    pub async fn create_image(&self, image: &NewImage) -> Result<Image> {
        let mut body = image.properties.clone();
        body.insert("id".to_owned(), json!(image.id));
        if let Some(name) = &image.name {
            body.insert("name".to_owned(), json!(name));
        }
        if !image.tags.is_empty() {
            body.insert("tags".to_owned(), json!(image.tags));
        }
        let answer = self
            .session
            .call(Call::post(Service::Image, "/images", Value::Object(body)))
            .await?;
        image_of(answer.json()?)
    }

    /// Asks Glance to fill the image from `url` (the `web-download`
    /// import method); the image goes `importing` then `active`.
    pub async fn import_from_url(&self, id: &str, url: &str) -> Result<()> {
        self.session
            .call(Call::post(
                Service::Image,
                format!("/images/{}/import", segment(id)),
                json!({"method": {"name": "web-download", "uri": url}}),
            ))
            .await?;
        Ok(())
    }

    /// Sets (or replaces) top-level fields: `protected`, `name`, …
    pub async fn update_image(&self, id: &str, changes: &[(&str, Value)]) -> Result<Image> {
        let patch: Vec<Value> = changes
            .iter()
            .map(|(path, value)| json!({"op": "replace", "path": format!("/{path}"), "value": value}))
            .collect();
        let answer = self
            .session
            .call(
                Call::new(
                    Service::Image,
                    http::Method::PATCH,
                    format!("/images/{}", segment(id)),
                )
                .body(Value::Array(patch))
                .content_type("application/openstack-images-v2.1-json-patch")
                .idempotent(),
            )
            .await?;
        image_of(answer.json()?)
    }

    /// Sets and removes fields (`add` sets one that exists as well).
    pub async fn change_image(&self, id: &str, changes: &[ImageChange]) -> Result<Image> {
        let patch: Vec<Value> = changes.iter().map(ImageChange::operation).collect();
        let answer = self
            .session
            .call(
                Call::new(
                    Service::Image,
                    http::Method::PATCH,
                    format!("/images/{}", segment(id)),
                )
                .body(Value::Array(patch))
                .content_type("application/openstack-images-v2.1-json-patch")
                .idempotent(),
            )
            .await?;
        image_of(answer.json()?)
    }

    /// Adds a tag (one the image has is kept).
    pub async fn add_image_tag(&self, id: &str, tag: &str) -> Result<()> {
        self.session
            .call(Call::new(
                Service::Image,
                http::Method::PUT,
                format!("/images/{}/tags/{}", segment(id), segment(tag)),
            ))
            .await?;
        Ok(())
    }

    /// Removes a tag; one the image does not have is removed.
    pub async fn remove_image_tag(&self, id: &str, tag: &str) -> Result<()> {
        self.delete_ignoring_gone(format!("/images/{}/tags/{}", segment(id), segment(tag)))
            .await
    }

    /// Shares the image with `member` (a project); one already a member
    /// stays one.
    pub async fn add_image_member(&self, id: &str, member: &str) -> Result<()> {
        match self
            .session
            .call(
                Call::post(
                    Service::Image,
                    format!("/images/{}/members", segment(id)),
                    json!({ "member": member }),
                )
                .idempotent(),
            )
            .await
        {
            Ok(_) => Ok(()),
            Err(error) if error.is_conflict() => Ok(()),
            Err(error) => Err(error),
        }
    }

    /// Stops sharing the image with `member`; one not a member is removed.
    pub async fn remove_image_member(&self, id: &str, member: &str) -> Result<()> {
        self.delete_ignoring_gone(format!(
            "/images/{}/members/{}",
            segment(id),
            segment(member)
        ))
        .await
    }

    /// Makes the image's data unreadable to all but admins (admin only).
    pub async fn deactivate_image(&self, id: &str) -> Result<()> {
        self.image_action(id, "deactivate").await
    }

    /// Makes a deactivated image usable again (admin only).
    pub async fn reactivate_image(&self, id: &str) -> Result<()> {
        self.image_action(id, "reactivate").await
    }

    async fn image_action(&self, id: &str, action: &str) -> Result<()> {
        self.session
            .call(
                Call::post(
                    Service::Image,
                    format!("/images/{}/actions/{action}", segment(id)),
                    json!({}),
                )
                .idempotent(),
            )
            .await?;
        Ok(())
    }

    /// The tasks that imported data into the image (image API 2.12),
    /// newest last as Glance lists them: a failed import's reason is in
    /// its task's `message`.
    pub async fn image_tasks(&self, id: &str) -> Result<Vec<Value>> {
        let answer: Value = self
            .session
            .call(Call::get(
                Service::Image,
                format!("/images/{}/tasks", segment(id)),
            ))
            .await?
            .json()?;
        Ok(answer["tasks"].as_array().cloned().unwrap_or_default())
    }

    /// Deletes the image; one already gone is deleted.
    pub async fn delete_image(&self, id: &str) -> Result<()> {
        self.delete_ignoring_gone(format!("/images/{}", segment(id)))
            .await
    }

    async fn delete_ignoring_gone(&self, path: String) -> Result<()> {
        self.session
            .call_removing(Call::delete(Service::Image, path))
            .await
    }
}

fn image_of(raw: Value) -> Result<Image> {
    let mut image: Image = serde_json::from_value(raw.clone()).map_err(|error| Error::Decode {
        service: Service::Image,
        message: format!("an image: {error}"),
    })?;
    image.raw = raw;
    Ok(image)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn changes_are_written_as_glance_reads_them() {
        let changes = [
            ImageChange::Set("os_distro".to_owned(), json!("debian")),
            ImageChange::Set("protected".to_owned(), json!(true)),
            ImageChange::Remove("architecture".to_owned()),
        ];
        let patch: Vec<Value> = changes.iter().map(ImageChange::operation).collect();
        assert_eq!(
            patch,
            [
                json!({"op": "add", "path": "/os_distro", "value": "debian"}),
                json!({"op": "add", "path": "/protected", "value": true}),
                json!({"op": "remove", "path": "/architecture"}),
            ]
        );
    }

    #[test]
    fn an_image_keeps_what_glance_said() {
        let raw = json!({
            "id": "i1", "name": "web", "status": "queued", "protected": false,
            "visibility": "private", "tags": ["a"], "size": null,
            "min_disk": 0, "min_ram": 0, "ember_resource": "ember-1"
        });
        let image = image_of(raw.clone()).expect("an image");
        assert_eq!(image.status, "queued");
        assert_eq!(image.size, None);
        assert_eq!(image.raw["ember_resource"], "ember-1");
    }
}
