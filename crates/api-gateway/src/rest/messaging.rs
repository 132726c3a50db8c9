//! The Messaging API's message post (Zaqar v2's), at `/messaging/v2`, for
//! the queues of Senlin message receivers: scripts written for Senlin and
//! Zaqar (`openstack message post`, curl) keep working. Ember keeps no
//! other queues: a queue is a message receiver's, `senlin-receiver-<id>`,
//! of the caller's project. Errors are Zaqar's shape
//! (`{"title", "description"}`).
//!
//! | call | success |
//! |---|---|
//! | `POST /messaging/v2/queues/{queue}/messages` `{"messages": [{"body": {cluster, action, params?}, "ttl"?}]}`, header `Client-ID: <uuid>` | 201 `{"resources": ["/v2/queues/{queue}/messages/{id}", …]}` |

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{Path, State};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use ember_proto::engine::v1 as pb;
use ember_proto::engine::v1::receiver_service_client::ReceiverServiceClient;
use ember_runtime::ErrorKind;
use http::{HeaderMap, StatusCode};
use serde_json::{Value, json};

use crate::GatewayState;
use crate::error::RestError;
use crate::rest::Authenticated;

pub const PREFIX: &str = "/messaging/v2";

/// Zaqar's default `max_messages_post_size`: the largest request body.
const MAX_POST_SIZE: usize = 262_144;

pub fn routes() -> Router<GatewayState> {
    Router::new().route("/queues/{queue}/messages", post(post_messages))
}

fn bad_request(message: impl Into<String>) -> RestError {
    RestError::new(ErrorKind::InvalidInput, message)
}

/// Zaqar's `Client-ID`: required, a UUID (its messages).
fn check_client_id(headers: &HeaderMap) -> Result<(), RestError> {
    let Some(value) = headers.get("client-id") else {
        return Err(bad_request("The Client-ID header is required."));
    };
    value
        .to_str()
        .ok()
        .and_then(|text| uuid::Uuid::parse_str(text.trim()).ok())
        .map(|_| ())
        .ok_or_else(|| bad_request("Malformed hexadecimal UUID."))
}

/// The engine's messages from a Zaqar post body (`{"messages": [{"body":
/// …, "ttl": …}]}`); what is wrong says which message.
fn messages_of(body: &[u8]) -> Result<Vec<pb::ReceiverMessageInput>, RestError> {
    if body.len() > MAX_POST_SIZE {
        return Err(bad_request(format!(
            "Message collection size is too large. Max size {MAX_POST_SIZE}"
        )));
    }
    let value: Value = serde_json::from_slice(body)
        .map_err(|error| bad_request(format!("the body is not JSON: {error}")))?;
    let Some(Value::Array(messages)) = value.get("messages") else {
        return Err(bad_request(
            "the body must be {\"messages\": [{\"body\": {…}, \"ttl\": seconds}, …]}",
        ));
    };
    messages
        .iter()
        .enumerate()
        .map(|(index, message)| {
            let Value::Object(message) = message else {
                return Err(bad_request(format!(
                    "messages[{index}]: must be an object {{\"body\": {{…}}, \"ttl\": seconds}}"
                )));
            };
            let body = match message.get("body") {
                None | Some(Value::Null) => {
                    return Err(bad_request(format!("messages[{index}]: body is required")));
                }
                Some(body) => body.to_string(),
            };
            let ttl = match message.get("ttl") {
                None | Some(Value::Null) => None,
                Some(ttl) => Some(ttl.as_i64().ok_or_else(|| {
                    bad_request(format!("messages[{index}]: ttl must be an integer"))
                })?),
            };
            Ok(pb::ReceiverMessageInput { body, ttl })
        })
        .collect()
}

/// `POST /messaging/v2/queues/{queue}/messages`: 201 naming each message.
async fn post_messages(
    State(state): State<GatewayState>,
    authenticated: Result<Authenticated, RestError>,
    Path(queue): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let posted = async {
        let Authenticated(identity) = authenticated?;
        check_client_id(&headers)?;
        let request = pb::PostReceiverMessagesRequest {
            queue_name: queue.clone(),
            messages: messages_of(&body)?,
        };
        let response = ReceiverServiceClient::new(state.upstreams.engine.clone())
            .max_decoding_message_size(ember_runtime::server::MAX_MESSAGE_BYTES)
            .post_receiver_messages(state.internal_request(&identity, request))
            .await?
            .into_inner();
        Ok::<_, RestError>(response.message_ids)
    }
    .await;
    match posted {
        Ok(ids) => {
            let resources: Vec<String> = ids
                .iter()
                .map(|id| format!("/v2/queues/{queue}/messages/{id}"))
                .collect();
            (
                StatusCode::CREATED,
                [(
                    http::header::LOCATION,
                    format!("{PREFIX}/queues/{queue}/messages?ids={}", ids.join(",")),
                )],
                axum::Json(json!({ "resources": resources })),
            )
                .into_response()
        }
        Err(error) => zaqar_error(error),
    }
}

/// An error in Zaqar's shape: `{"title", "description"}`, the status and
/// the response's extensions (the gateway's metrics read them) kept.
fn zaqar_error(error: RestError) -> Response {
    let description = error.message().to_owned();
    let (mut parts, _) = error.into_response().into_parts();
    let title = match parts.status {
        StatusCode::BAD_REQUEST => "Invalid API request",
        StatusCode::NOT_FOUND => "Not found",
        status => status.canonical_reason().unwrap_or("Error"),
    };
    parts.headers.remove(http::header::CONTENT_LENGTH);
    let body = json!({ "title": title, "description": description }).to_string();
    Response::from_parts(parts, Body::from(body))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn client_ids_are_required_uuids() {
        let mut headers = HeaderMap::new();
        assert_eq!(
            check_client_id(&headers).unwrap_err().message(),
            "The Client-ID header is required."
        );
        headers.insert("client-id", "not-a-uuid".parse().unwrap());
        assert_eq!(
            check_client_id(&headers).unwrap_err().message(),
            "Malformed hexadecimal UUID."
        );
        headers.insert(
            "client-id",
            "3381af92-2b9e-11e3-b191-71861300734c".parse().unwrap(),
        );
        assert!(check_client_id(&headers).is_ok());
    }

    #[test]
    fn posts_are_zaqars_shape() {
        let messages = messages_of(
            br#"{"messages": [{"body": {"cluster": "c", "action": "CLUSTER_CHECK"}, "ttl": 300},
                               {"body": {"cluster": "c", "action": "CLUSTER_CHECK"}}]}"#,
        )
        .unwrap();
        assert_eq!(messages.len(), 2);
        assert_eq!(messages[0].ttl, Some(300));
        assert_eq!(messages[1].ttl, None);
        for (bad, expected) in [
            (&br#"[1]"#[..], "the body must be"),
            (
                br#"{"messages": [{"ttl": 60}]}"#,
                "messages[0]: body is required",
            ),
            (
                br#"{"messages": [{"body": {}, "ttl": "x"}]}"#,
                "messages[0]: ttl must be",
            ),
            (
                br#"{"messages": [{"body": {}}, 2]}"#,
                "messages[1]: must be an object",
            ),
        ] {
            let message = messages_of(bad).unwrap_err().message().to_owned();
            assert!(message.starts_with(expected), "{message}");
        }
        let huge = vec![b' '; MAX_POST_SIZE + 1];
        assert!(messages_of(&huge).is_err());
    }
}
