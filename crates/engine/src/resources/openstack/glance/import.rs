//! Waiting for a web-download import: the image `active` (or
//! deactivated, for an image the template wants inactive), `killed` as
//! Heat's failure, and an import Glance gave up on (it puts the image
//! back in `queued`) as a failure in the words of Glance's import task.

use ember_openstack::glance::{Glance, Image};
use serde_json::Value;

use super::super::heat::went_to_status;
use super::super::{Cloud, failure};
use crate::resources::ResourceFailure;

/// Heat's `check_create_complete`: `killed` failed; with `active` the
/// image is waited for until `active`, without it deactivated then.
pub async fn wait_imported(
    glance: &Glance,
    image_id: &str,
    location: &str,
    active: bool,
) -> Result<Image, ResourceFailure> {
    Cloud::wait_for(&format!("image {image_id} active"), || async move {
        let image = glance
            .image(image_id)
            .await
            .map_err(failure)?
            .ok_or_else(|| ResourceFailure(format!("No image found with ID {image_id}")))?;
        match image.status.as_str() {
            "killed" => Err(went_to_status("killed", "Unknown")),
            "active" if active => Ok(Some(image)),
            "active" => {
                glance.deactivate_image(image_id).await.map_err(failure)?;
                Ok(None)
            }
            "deactivated" if !active => Ok(Some(image)),
            _ => match failed_import(glance, &image).await? {
                Some(reason) => Err(ResourceFailure(format!(
                    "Glance could not import image {image_id} from {location}: {reason}"
                ))),
                None => Ok(None),
            },
        }
    })
    .await
}

/// Why the last import failed, if it did and none is under way: Glance
/// puts a failed image back in `queued`, and its import task says why.
async fn failed_import(glance: &Glance, image: &Image) -> Result<Option<String>, ResourceFailure> {
    if image.status != "queued" {
        return Ok(None);
    }
    let tasks = glance.image_tasks(&image.id).await.map_err(failure)?;
    fn status(task: &Value) -> &str {
        task.get("status").and_then(Value::as_str).unwrap_or("")
    }
    if tasks
        .iter()
        .any(|task| matches!(status(task), "pending" | "processing"))
    {
        return Ok(None);
    }
    let newest_failure = tasks
        .iter()
        .filter(|task| status(task) == "failure")
        .max_by_key(|task| {
            task.get("updated_at")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_owned()
        });
    Ok(newest_failure.map(|task| {
        task.get("message")
            .and_then(Value::as_str)
            .filter(|message| !message.is_empty())
            .unwrap_or("Unknown")
            .to_owned()
    }))
}
