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
            .ok_or_else(|| ResourceFailure::new(format!("No image found with ID {image_id}")))?;
        match image.status.as_str() {
            "killed" => Err(went_to_status("killed", "Unknown")),
            "active" if active => Ok(Some(image)),
            "active" => {
                glance.deactivate_image(image_id).await.map_err(failure)?;
                Ok(None)
            }
            "deactivated" if !active => Ok(Some(image)),
            _ => match failed_import(glance, &image).await? {
                Some(reason) => Err(ResourceFailure::new(format!(
                    "Glance could not import image {image_id} from {location}: {reason}"
                ))),
                None => Ok(None),
            },
        }
    })
    .await
}

/// Why the last import failed, if it did and none is under way: Glance
/// puts a failed image back in `queued`, and its import task says why. A
/// Glance that does not list an image's tasks (before image API 2.12, or
/// a policy that keeps them from the owner) still marks the image
/// (`os_glance_failed_import`, the stores it failed for).
async fn failed_import(glance: &Glance, image: &Image) -> Result<Option<String>, ResourceFailure> {
    if image.status != "queued" {
        return Ok(None);
    }
    let tasks = match glance.image_tasks(&image.id).await {
        Ok(tasks) => tasks,
        Err(error) if error.is_not_found() || error.status() == Some(403) => {
            return Ok(image
                .raw
                .get("os_glance_failed_import")
                .and_then(Value::as_str)
                .filter(|stores| !stores.is_empty())
                .map(|stores| format!("the import failed (os_glance_failed_import: {stores})")));
        }
        Err(error) => return Err(failure(error)),
    };
    Ok(newest_failure(&tasks))
}

/// The message of the newest failed task, when no task is under way.
fn newest_failure(tasks: &[Value]) -> Option<String> {
    fn status(task: &Value) -> &str {
        task.get("status").and_then(Value::as_str).unwrap_or("")
    }
    if tasks
        .iter()
        .any(|task| matches!(status(task), "pending" | "processing"))
    {
        return None;
    }
    tasks
        .iter()
        .filter(|task| status(task) == "failure")
        .max_by_key(|task| {
            task.get("updated_at")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_owned()
        })
        .map(|task| {
            task.get("message")
                .and_then(Value::as_str)
                .filter(|message| !message.is_empty())
                .unwrap_or("Unknown")
                .to_owned()
        })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn the_newest_failed_task_says_why_unless_one_is_under_way() {
        let failed = |updated_at: &str, message: &str| json!({"status": "failure", "updated_at": updated_at, "message": message});
        assert_eq!(newest_failure(&[]), None);
        assert_eq!(
            newest_failure(&[
                failed("2026-01-01T10:00:00Z", "Connection refused"),
                failed("2026-01-01T11:00:00Z", "404 Not Found"),
            ]),
            Some("404 Not Found".to_owned())
        );
        assert_eq!(
            newest_failure(&[
                failed("2026-01-01T10:00:00Z", "Connection refused"),
                json!({"status": "processing", "updated_at": "2026-01-01T11:00:00Z"}),
            ]),
            None,
            "a new import is under way"
        );
        assert_eq!(
            newest_failure(&[failed("2026-01-01T10:00:00Z", "")]),
            Some("Unknown".to_owned())
        );
    }
}
