//! Version discovery and microversions for the Clustering API.
//!
//! `GET /clustering/v1` answers Senlin's single-version document.
//! keystoneauth (and so openstacksdk and the `openstack` CLI) fetches it,
//! without a token, before its first call even when the endpoint is given
//! explicitly; a 404 there is a `DiscoveryFailure` and the client never
//! sends a request.
//!
//! [`negotiate`] reads the microversion a request asks for, as Senlin's
//! version-negotiation middleware does: `OpenStack-API-Version: clustering
//! X.Y` (the entry for `clustering` in a comma-separated list), else the
//! legacy `X-OpenStack-Clustering-API-Version: X.Y`, else 1.0; `latest` is
//! 1.14. Malformed → 400, outside 1.0..=1.14 → 406, with Senlin's messages.
//! The version is put in the request's extensions, where handlers take it
//! as an [`ApiVersion`] argument, and every answer names it back
//! (`OpenStack-API-Version: clustering 1.14`, `Vary: OpenStack-API-Version`).

use std::convert::Infallible;
use std::fmt;

use axum::Json;
use axum::extract::{FromRequestParts, Request};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use http::request::Parts;
use http::{HeaderMap, HeaderValue, StatusCode};
use serde_json::{Value, json};

use super::{PREFIX, bad_request};
use crate::error::RestError;

/// The oldest microversion a client may ask for.
pub const MIN_MICROVERSION: &str = "1.0";
/// The newest Senlin microversion whose bodies this API speaks (nodes show
/// `tainted`, actions filter by `cluster_id`).
pub const MAX_MICROVERSION: &str = "1.14";

/// The header Senlin reads and answers the microversion in.
const VERSION_HEADER: &str = "OpenStack-API-Version";
/// The header older clients send the bare version in.
const LEGACY_VERSION_HEADER: &str = "X-OpenStack-Clustering-API-Version";

/// A Clustering API microversion (`1.12`). Ordered, so handlers compare:
/// `version >= ApiVersion::new(1, 13)`. A handler that needs it takes it as
/// an argument (`version: ApiVersion`); a call made outside the negotiated
/// routes gets 1.0, Senlin's default.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct ApiVersion {
    pub major: u32,
    pub minor: u32,
}

impl ApiVersion {
    pub const MIN: ApiVersion = ApiVersion::new(1, 0);
    pub const MAX: ApiVersion = ApiVersion::new(1, 14);

    pub const fn new(major: u32, minor: u32) -> ApiVersion {
        ApiVersion { major, minor }
    }

    /// `X.Y` with no sign, no leading zero and no extra text, as Senlin's
    /// `APIVersionRequest` accepts it.
    pub fn parse(text: &str) -> Option<ApiVersion> {
        let (major, minor) = text.split_once('.')?;
        let number = |part: &str, zero_allowed: bool| {
            let plain = !part.is_empty()
                && part.bytes().all(|byte| byte.is_ascii_digit())
                && (part == "0" && zero_allowed || !part.starts_with('0'));
            plain.then(|| part.parse::<u32>().ok()).flatten()
        };
        Some(ApiVersion::new(number(major, false)?, number(minor, true)?))
    }

    /// Refuses a call that came in a version this method is not in, with
    /// Senlin's `MethodVersionNotFound` (400): e.g. node operations before
    /// 1.4 — `version.require(ApiVersion::new(1, 4))?`.
    pub fn require(self, minimum: ApiVersion) -> Result<(), RestError> {
        if self >= minimum {
            Ok(())
        } else {
            Err(bad_request(format!(
                "API version '{self}' is not supported on this method."
            )))
        }
    }
}

impl fmt::Display for ApiVersion {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(formatter, "{}.{}", self.major, self.minor)
    }
}

impl<S: Send + Sync> FromRequestParts<S> for ApiVersion {
    type Rejection = Infallible;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, Infallible> {
        Ok(parts
            .extensions
            .get::<ApiVersion>()
            .copied()
            .unwrap_or(ApiVersion::MIN))
    }
}

/// Why a requested microversion is refused.
#[derive(Debug, PartialEq)]
enum Refusal {
    /// 400: not `X.Y`.
    Malformed(String),
    /// 406: outside what this API speaks.
    Unsupported(String),
}

/// The text the client asked for, if any: the `clustering` entry of
/// `OpenStack-API-Version`, else the legacy header.
fn requested_text(headers: &HeaderMap) -> Option<String> {
    let entry = headers
        .get_all(VERSION_HEADER)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(','))
        .find_map(|entry| {
            let mut words = entry.split_whitespace();
            let service = words.next()?;
            let version = words.next()?;
            service
                .eq_ignore_ascii_case("clustering")
                .then(|| version.to_owned())
        });
    entry.or_else(|| {
        headers
            .get(LEGACY_VERSION_HEADER)
            .and_then(|value| value.to_str().ok())
            .map(|value| value.trim().to_owned())
    })
}

/// The microversion a request is served in.
fn requested(headers: &HeaderMap) -> Result<ApiVersion, Refusal> {
    let Some(text) = requested_text(headers) else {
        return Ok(ApiVersion::MIN);
    };
    if text.eq_ignore_ascii_case("latest") {
        return Ok(ApiVersion::MAX);
    }
    let version = ApiVersion::parse(&text).ok_or_else(|| {
        Refusal::Malformed(format!(
            "API Version String '{text}' is of invalid format. It must be of format 'major.minor'."
        ))
    })?;
    if !(ApiVersion::MIN..=ApiVersion::MAX).contains(&version) {
        return Err(Refusal::Unsupported(format!(
            "Version '{text}' is not supported by the API. Minimum is '{}' and maximum is '{}'.",
            ApiVersion::MIN,
            ApiVersion::MAX
        )));
    }
    Ok(version)
}

/// Senlin's error body with a status `RestError` has no kind for (406).
fn refused(status: StatusCode, message: &str) -> Response {
    let title = status.canonical_reason().unwrap_or("Error");
    let body = json!({
        "code": status.as_u16(),
        "title": title,
        "explanation": message,
        "error": {
            "code": status.as_u16(),
            "title": title,
            "message": message,
            "type": "InvalidGlobalAPIVersion",
            "traceback": null,
        }
    });
    (status, Json(body)).into_response()
}

/// Middleware: serves the request in the microversion it asks for (see the
/// module header) and names that version in the answer.
pub async fn negotiate(mut request: Request, next: Next) -> Response {
    let version = match requested(request.headers()) {
        Ok(version) => version,
        Err(Refusal::Malformed(message)) => return bad_request(message).into_response(),
        Err(Refusal::Unsupported(message)) => {
            return refused(StatusCode::NOT_ACCEPTABLE, &message);
        }
    };
    request.extensions_mut().insert(version);
    let mut response = next.run(request).await;
    if let Ok(value) = HeaderValue::from_str(&format!("clustering {version}")) {
        let headers = response.headers_mut();
        headers.insert(VERSION_HEADER, value);
        headers.insert(http::header::VARY, HeaderValue::from_static(VERSION_HEADER));
    }
    response
}

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

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut headers = HeaderMap::new();
        for (name, value) in pairs {
            headers.append(*name, HeaderValue::from_static(value));
        }
        headers
    }

    #[test]
    fn no_header_is_one_point_zero_and_latest_is_the_maximum() {
        assert_eq!(requested(&HeaderMap::new()), Ok(ApiVersion::new(1, 0)));
        let latest = headers(&[(VERSION_HEADER, "clustering latest")]);
        assert_eq!(requested(&latest), Ok(ApiVersion::new(1, 14)));
        let other_services = headers(&[(VERSION_HEADER, "compute 2.1, clustering 1.12")]);
        assert_eq!(requested(&other_services), Ok(ApiVersion::new(1, 12)));
        let legacy = headers(&[(LEGACY_VERSION_HEADER, "1.5")]);
        assert_eq!(requested(&legacy), Ok(ApiVersion::new(1, 5)));
        let only_compute = headers(&[(VERSION_HEADER, "compute 2.1")]);
        assert_eq!(requested(&only_compute), Ok(ApiVersion::MIN));
    }

    #[test]
    fn a_malformed_version_is_refused_with_senlins_message() {
        for text in ["1", "1.a", "01.2", "1.02", "-1.0", "1.2.3"] {
            let value = HeaderValue::from_str(&format!("clustering {text}")).unwrap();
            let mut asked = HeaderMap::new();
            asked.insert(VERSION_HEADER, value);
            assert_eq!(
                requested(&asked),
                Err(Refusal::Malformed(format!(
                    "API Version String '{text}' is of invalid format. It must be of format 'major.minor'."
                ))),
                "{text}"
            );
        }
    }

    #[test]
    fn a_version_outside_the_range_is_not_acceptable() {
        let asked = headers(&[(VERSION_HEADER, "clustering 1.15")]);
        assert_eq!(
            requested(&asked),
            Err(Refusal::Unsupported(
                "Version '1.15' is not supported by the API. Minimum is '1.0' and maximum is '1.14'."
                    .to_owned()
            ))
        );
        let two = headers(&[(VERSION_HEADER, "clustering 2.0")]);
        assert!(matches!(requested(&two), Err(Refusal::Unsupported(_))));
    }

    #[test]
    fn versions_compare_by_number_not_text() {
        assert!(ApiVersion::new(1, 10) > ApiVersion::new(1, 9));
        assert_eq!(ApiVersion::new(1, 4).to_string(), "1.4");
        assert!(ApiVersion::new(1, 4).require(ApiVersion::new(1, 4)).is_ok());
        let error = ApiVersion::new(1, 3)
            .require(ApiVersion::new(1, 4))
            .unwrap_err();
        assert_eq!(
            error.message(),
            "API version '1.3' is not supported on this method."
        );
    }

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
