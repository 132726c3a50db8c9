//! How a call to the cloud failed, classified once for every caller: the
//! service's own answer (status and message, read from whichever error
//! body the service writes), no answer at all, no endpoint in the catalog,
//! credentials Keystone refused, or an answer that is not what the API
//! documents. Whether a failure is worth trying again is decided here
//! ([`Error::is_retryable`]), not in each caller.

use serde_json::Value;

/// The services Ember calls, by what they do (the catalog's types).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Service {
    Identity,
    Compute,
    Network,
    BlockStorage,
    Image,
}

impl Service {
    /// The service type in the catalog and in messages.
    pub fn as_str(self) -> &'static str {
        match self {
            Service::Identity => "identity",
            Service::Compute => "compute",
            Service::Network => "network",
            Service::BlockStorage => "block-storage",
            Service::Image => "image",
        }
    }

    /// The project that usually serves it, as operators name it.
    pub fn project(self) -> &'static str {
        match self {
            Service::Identity => "Keystone",
            Service::Compute => "Nova",
            Service::Network => "Neutron",
            Service::BlockStorage => "Cinder",
            Service::Image => "Glance",
        }
    }

    /// Every catalog type the service may be registered under, preferred
    /// first (the service-types authority's aliases).
    pub fn catalog_types(self) -> &'static [&'static str] {
        match self {
            Service::Identity => &["identity"],
            Service::Compute => &["compute"],
            Service::Network => &["network"],
            Service::BlockStorage => &[
                "block-storage",
                "volumev3",
                "volumev2",
                "volume",
                "block-store",
            ],
            Service::Image => &["image"],
        }
    }
}

impl std::fmt::Display for Service {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({})", self.project(), self.as_str())
    }
}

/// An error status a service answered with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError {
    pub service: Service,
    pub method: String,
    /// The path called, below the service's endpoint.
    pub path: String,
    pub status: u16,
    /// The service's own message (its error body), or the status's name.
    pub message: String,
    /// The id the service logged the request under.
    pub request_id: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    #[error("{}: {} (HTTP {} on {} {}{})", .0.service.project(), .0.message, .0.status, .0.method, .0.path, request_suffix(&.0.request_id))]
    Api(ApiError),
    /// No answer: refused connection, TLS, timeout.
    #[error("{} ({}) is unreachable: {message}", .service.project(), .service.as_str())]
    Unreachable { service: Service, message: String },
    /// The catalog does not offer the service where Ember looks.
    #[error("the cloud's catalog has no {interface} endpoint for {} ({}){}", .service.project(), .service.as_str(), region_suffix(region))]
    NoEndpoint {
        service: Service,
        interface: String,
        region: Option<String>,
    },
    /// Keystone refused the credentials (or the trust).
    #[error("Keystone refused the credentials: {0}")]
    Authentication(String),
    /// The service answered something its API does not document.
    #[error("{} answered unexpectedly: {message}", .service.project())]
    Decode { service: Service, message: String },
    /// The service cannot do what was asked at the version it speaks.
    #[error("{} ({}) {message}", .service.project(), .service.as_str())]
    Unsupported { service: Service, message: String },
}

fn request_suffix(request_id: &Option<String>) -> String {
    request_id
        .as_deref()
        .map(|id| format!(", request {id}"))
        .unwrap_or_default()
}

fn region_suffix(region: &Option<String>) -> String {
    region
        .as_deref()
        .map(|region| format!(" in region {region:?}"))
        .unwrap_or_default()
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// The HTTP status the service answered, if it answered.
    pub fn status(&self) -> Option<u16> {
        match self {
            Error::Api(api) => Some(api.status),
            _ => None,
        }
    }

    pub fn is_not_found(&self) -> bool {
        self.status() == Some(404)
    }

    pub fn is_conflict(&self) -> bool {
        self.status() == Some(409)
    }

    /// Worth asking again later: the service did not answer, or said it is
    /// overloaded or in the middle of something (502, 503, 504; 409 is the
    /// caller's to judge — Nova answers it both for "still busy" and for
    /// "never").
    pub fn is_retryable(&self) -> bool {
        match self {
            Error::Unreachable { .. } => true,
            Error::Api(api) => matches!(api.status, 502..=504),
            Error::NoEndpoint { .. }
            | Error::Authentication(_)
            | Error::Decode { .. }
            | Error::Unsupported { .. } => false,
        }
    }

    /// The service behind the failure, when there is one.
    pub fn service(&self) -> Option<Service> {
        match self {
            Error::Api(api) => Some(api.service),
            Error::Unreachable { service, .. }
            | Error::NoEndpoint { service, .. }
            | Error::Decode { service, .. }
            | Error::Unsupported { service, .. } => Some(*service),
            Error::Authentication(_) => Some(Service::Identity),
        }
    }

    /// The service's own words, without the call's details: what a
    /// resource's status reason shows.
    pub fn service_message(&self) -> String {
        match self {
            Error::Api(api) => api.message.clone(),
            other => other.to_string(),
        }
    }
}

/// The message an error body carries, whichever service wrote it:
/// Nova and Cinder `{"itemNotFound": {"message": …}}`, Neutron
/// `{"NeutronError": {"message": …}}`, Keystone `{"error": {"message": …}}`,
/// Glance's text pages. Falls back to the status's name.
pub fn message_of(status: u16, body: &[u8]) -> String {
    if let Ok(value) = serde_json::from_slice::<Value>(body)
        && let Some(message) = json_message(&value)
    {
        return message;
    }
    let text = String::from_utf8_lossy(body);
    let text = strip_html(&text);
    let collapsed = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if collapsed.is_empty() {
        return http::StatusCode::from_u16(status)
            .ok()
            .and_then(|status| status.canonical_reason())
            .unwrap_or("error")
            .to_owned();
    }
    truncated(collapsed)
}

fn json_message(value: &Value) -> Option<String> {
    let object = value.as_object()?;
    if let Some(message) = object.get("message").and_then(Value::as_str) {
        return Some(truncated(without_line_breaks(message)));
    }
    // One wrapper object holding the message (every OpenStack service's
    // fault body), or a list of them (Glance's `errors`).
    object.values().find_map(|inner| match inner {
        Value::Object(_) => json_message(inner),
        Value::Array(items) => items.iter().find_map(json_message),
        Value::String(text) if object.len() == 1 => Some(truncated(text.trim().to_owned())),
        _ => None,
    })
}

/// WebOb (Glance's error bodies) writes HTML line breaks into a JSON
/// message (`conflict.<br /><br />\nProperty x does not exist.<br /><br />\n\n`):
/// its lines are joined with spaces instead.
fn without_line_breaks(message: &str) -> String {
    if !message.contains("<br />") {
        return message.trim().to_owned();
    }
    message
        .split("<br />")
        .flat_map(str::lines)
        .map(str::trim)
        .filter(|line| !line.is_empty())
        .collect::<Vec<_>>()
        .join(" ")
}

/// Glance and the WSGI layers answer some errors as small HTML pages.
fn strip_html(text: &str) -> String {
    let mut plain = String::with_capacity(text.len());
    let mut in_tag = false;
    for c in text.chars() {
        match c {
            '<' => in_tag = true,
            '>' if in_tag => {
                in_tag = false;
                plain.push(' ');
            }
            _ if !in_tag => plain.push(c),
            _ => {}
        }
    }
    plain
}

/// Keeps a message readable in a status reason.
fn truncated(mut text: String) -> String {
    const LONGEST: usize = 1000;
    if text.len() > LONGEST {
        let mut end = LONGEST;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        text.truncate(end);
        text.push('…');
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_service_writes_its_message_its_own_way() {
        let cases: [(&str, &str); 8] = [
            (
                r#"{"itemNotFound": {"code": 404, "message": "Flavor m1.huge could not be found."}}"#,
                "Flavor m1.huge could not be found.",
            ),
            (
                r#"{"NeutronError": {"type": "NetworkNotFound", "message": "Network 5 could not be found.", "detail": ""}}"#,
                "Network 5 could not be found.",
            ),
            (
                r#"{"error": {"code": 401, "title": "Unauthorized", "message": "The request you have made requires authentication."}}"#,
                "The request you have made requires authentication.",
            ),
            (
                r#"{"overLimit": {"code": 403, "message": "Quota exceeded for instances: Requested 1, but already used 10 of 10 instances", "retryAfter": "0"}}"#,
                "Quota exceeded for instances: Requested 1, but already used 10 of 10 instances",
            ),
            (
                "<html><head><title>404 Not Found</title></head><body><h1>404 Not Found</h1>No image found with ID 7</body></html>",
                "404 Not Found 404 Not Found No image found with ID 7",
            ),
            (
                r#"{"errors": [{"title": "Bad Request", "message": "Invalid disk format"}]}"#,
                "Invalid disk format",
            ),
            (
                r#"{"message": "No image found with ID 7<br /><br />\n\n\n", "code": "404 Not Found", "title": "Not Found"}"#,
                "No image found with ID 7",
            ),
            (
                r#"{"message": "There was a conflict when trying to complete your request.<br /><br />\nProperty x does not exist.<br /><br />\n\n", "code": "409 Conflict", "title": "Conflict"}"#,
                "There was a conflict when trying to complete your request. Property x does not exist.",
            ),
        ];
        for (body, message) in cases {
            assert_eq!(message_of(400, body.as_bytes()), message, "{body}");
        }
        assert_eq!(message_of(503, b""), "Service Unavailable");
        assert_eq!(message_of(418, b"   \n"), "I'm a teapot");
    }

    #[test]
    fn long_messages_are_cut_on_a_character_boundary() {
        let long = format!(r#"{{"message": "{}"}}"#, "é".repeat(900));
        let message = message_of(400, long.as_bytes());
        assert!(message.ends_with('…'));
        assert!(message.len() <= 1003);
    }

    #[test]
    fn only_failures_without_a_verdict_are_retryable() {
        let api = |status| {
            Error::Api(ApiError {
                service: Service::Compute,
                method: "GET".to_owned(),
                path: "/servers/x".to_owned(),
                status,
                message: "m".to_owned(),
                request_id: Some("req-1".to_owned()),
            })
        };
        assert!(api(503).is_retryable());
        assert!(api(502).is_retryable());
        assert!(!api(500).is_retryable());
        assert!(!api(404).is_retryable());
        assert!(api(404).is_not_found());
        assert!(api(409).is_conflict());
        assert!(
            Error::Unreachable {
                service: Service::Network,
                message: "connection refused".to_owned()
            }
            .is_retryable()
        );
        assert!(!Error::Authentication("no".to_owned()).is_retryable());
        assert_eq!(
            api(404).to_string(),
            "Nova: m (HTTP 404 on GET /servers/x, request req-1)"
        );
        assert_eq!(api(404).service_message(), "m");
    }
}
