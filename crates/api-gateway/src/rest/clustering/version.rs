//! Version discovery for the Clustering API: `GET /clustering/v1` answers
//! Senlin's single-version document. keystoneauth (and so openstacksdk and
//! the `openstack` CLI) fetches it, without a token, before its first call
//! even when the endpoint is given explicitly; a 404 there is a
//! `DiscoveryFailure` and the client never sends a request.

use axum::Json;
use serde_json::{Value, json};

use super::PREFIX;

/// The oldest microversion a client may ask for.
pub const MIN_MICROVERSION: &str = "1.0";
/// The newest Senlin microversion whose bodies this API speaks (nodes show
/// `tainted`, actions filter by `cluster_id`). The `OpenStack-API-Version`
/// header is accepted and ignored: every version gets the same answers.
pub const MAX_MICROVERSION: &str = "1.14";

/// Senlin's description of API v1, with `self` pointing at this prefix (not
/// Senlin's `/v1/`: keystoneauth joins the link to the endpoint it fetched
/// and sends every later call under the result). No trailing slash: the
/// router serves `/clustering/v1`, not `/clustering/v1/`.
fn description() -> Value {
    json!({
        "id": "1.0",
        "status": "CURRENT",
        "updated": "2016-01-18T00:00:00Z",
        "min_version": MIN_MICROVERSION,
        "max_version": MAX_MICROVERSION,
        "media-types": [{
            "base": "application/json",
            "type": "application/vnd.openstack.clustering-v1+json",
        }],
        "links": [{"rel": "self", "href": PREFIX}],
    })
}

/// `GET /clustering` and `/clustering/`: 300 `{"versions": [{…}]}`, as
/// Senlin's root answers — what clients probe when the catalog gives the
/// unversioned endpoint. No token needed.
pub async fn list_versions() -> (http::StatusCode, Json<Value>) {
    (
        http::StatusCode::MULTIPLE_CHOICES,
        Json(json!({ "versions": [description()] })),
    )
}

/// `GET /clustering/v1` (and `/clustering/v1/`): `{"version": {…}}`, no
/// token needed.
pub async fn show_version() -> Json<Value> {
    Json(json!({ "version": description() }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_root_lists_the_one_version() {
        let (status, Json(document)) = list_versions().await;
        assert_eq!(status, http::StatusCode::MULTIPLE_CHOICES);
        assert_eq!(document["versions"][0]["id"], "1.0");
        assert_eq!(
            document["versions"][0]["links"][0]["href"],
            "/clustering/v1"
        );
    }

    #[tokio::test]
    async fn the_version_document_names_this_prefix_and_the_microversion_range() {
        let Json(document) = show_version().await;
        let version = &document["version"];
        assert_eq!(version["id"], "1.0");
        assert_eq!(version["status"], "CURRENT");
        assert_eq!(version["min_version"], "1.0");
        assert_eq!(version["max_version"], "1.14");
        assert_eq!(version["links"][0]["rel"], "self");
        assert_eq!(version["links"][0]["href"], "/clustering/v1");
    }
}
