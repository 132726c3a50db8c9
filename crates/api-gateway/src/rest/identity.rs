//! The Keystone v3 front door at `/identity`, served when the gateway keeps
//! the identity itself (`auth.mode = "builtin"`, the default): what
//! keystoneauth — and so the `openstack` CLI, openstacksdk and tempest —
//! asks of a cloud before its first call.
//!
//! | call | answer |
//! |---|---|
//! | `GET /identity` (no token) | 300 `{"versions": {"values": [v3]}}` |
//! | `GET /identity/v3` (no token) | 200 `{"version": v3}` |
//! | `POST /identity/v3/auth/tokens` (`password` or `token` method) | 201, `X-Subject-Token`, `{"token": …}` with the catalog unless `?nocatalog` |
//! | `GET\|HEAD /identity/v3/auth/tokens` (`X-Subject-Token`) | 200 `{"token": …}` / 404 |
//! | `DELETE /identity/v3/auth/tokens` (`X-Subject-Token`) | 204: revoked on every replica |
//! | `GET /identity/v3/auth/catalog`, `GET /identity/v3/auth/projects` | 200 the token's catalog / project |
//!
//! Every failed authentication is the same 401, whatever was wrong (the
//! log says which) — a user locked out by Keystone's account lockout
//! (`auth.lockout_failure_attempts` wrong passwords in a row, for
//! `auth.lockout_duration_secs` or until an admin unlocks it) included.
//! An address asking for tokens faster than `auth.login_rate_per_source`
//! gets 429 with `Retry-After`, before anything is read. Ember issues project-scoped tokens only: a request
//! without a scope is scoped to the user's default project, and one for a
//! domain or the system is refused (Keystone would issue an unscoped or a
//! domain token).

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::extract::{ConnectInfo, Query, State};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Extension, Json, Router};
use chrono::{DateTime, Utc};
use ember_runtime::ErrorKind;
use ember_runtime::auth::TokenDetails;
use http::{HeaderMap, HeaderValue, StatusCode, header};
use serde_json::{Value, json};

use crate::GatewayState;
use crate::auth::AuthError;
use crate::error::RestError;
use crate::identity::{DOMAIN_ID, DOMAIN_NAME, Directory, Domain, LoginFailure, Reference};

pub const PREFIX: &str = "/identity";
const SUBJECT_TOKEN_HEADER: &str = "x-subject-token";

pub fn routes() -> Router<GatewayState> {
    Router::new()
        .route(PREFIX, get(versions))
        .route("/identity/", get(versions))
        .route("/identity/v3", get(version))
        .route("/identity/v3/", get(version))
        .route(
            "/identity/v3/auth/tokens",
            get(validate).post(issue).delete(revoke),
        )
        .route("/identity/v3/auth/catalog", get(catalog_of_token))
        .route("/identity/v3/auth/projects", get(projects_of_token))
}

/// Where users reach the gateway: the configured public URL, else the
/// scheme-less `Host` the request came to.
fn base_url(state: &GatewayState, headers: &HeaderMap) -> String {
    if !state.identity.public_url.is_empty() {
        return state.identity.public_url.trim_end_matches('/').to_owned();
    }
    let host = headers
        .get(http::header::HOST)
        .and_then(|host| host.to_str().ok())
        .filter(|host| {
            !host.is_empty()
                && host
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || ".-:[]".contains(c))
        })
        .unwrap_or("localhost");
    format!("http://{host}")
}

fn v3_description(base: &str) -> Value {
    json!({
        "id": "v3.14",
        "status": "stable",
        "updated": "2020-04-07T00:00:00Z",
        "links": [{"rel": "self", "href": format!("{base}{PREFIX}/v3/")}],
        "media-types": [{
            "base": "application/json",
            "type": "application/vnd.openstack.identity-v3+json",
        }],
    })
}

async fn versions(State(state): State<GatewayState>, headers: HeaderMap) -> Response {
    let base = base_url(&state, &headers);
    (
        StatusCode::MULTIPLE_CHOICES,
        Json(json!({"versions": {"values": [v3_description(&base)]}})),
    )
        .into_response()
}

async fn version(State(state): State<GatewayState>, headers: HeaderMap) -> Json<Value> {
    let base = base_url(&state, &headers);
    Json(json!({"version": v3_description(&base)}))
}

fn directory(state: &GatewayState) -> Result<&Directory, RestError> {
    state.authenticator.directory().ok_or_else(|| {
        RestError::new(
            ErrorKind::NotFound,
            "this gateway validates tokens against an external Keystone: authenticate there",
        )
    })
}

/// The one answer to every failed authentication.
fn unauthorized() -> RestError {
    RestError::new(
        ErrorKind::Unauthenticated,
        "The request you have made requires authentication.",
    )
}

fn bad_request(message: impl Into<String>) -> RestError {
    RestError::new(ErrorKind::InvalidInput, message)
}

/// A `{"id"}` or `{"name", "domain"}` object of an auth request.
fn reference_of(value: &Value, what: &str) -> Result<Reference, RestError> {
    let Some(object) = value.as_object() else {
        return Err(bad_request(format!("{what} must be an object")));
    };
    let text = |key: &str| -> Result<Option<String>, RestError> {
        match object.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(text)) if !text.is_empty() && text.len() <= 255 => {
                Ok(Some(text.clone()))
            }
            Some(_) => Err(bad_request(format!(
                "{what}.{key} must be a string of 1 to 255 characters"
            ))),
        }
    };
    if let Some(id) = text("id")? {
        return Ok(Reference::Id(id));
    }
    let Some(name) = text("name")? else {
        return Err(bad_request(format!("{what} needs an id or a name")));
    };
    let domain = match object.get("domain") {
        None | Some(Value::Null) => None,
        Some(domain @ Value::Object(fields)) => {
            let field = |key: &str| fields.get(key).and_then(Value::as_str).map(str::to_owned);
            match (field("id"), field("name")) {
                (Some(id), _) => Some(Domain::Id(id)),
                (None, Some(name)) => Some(Domain::Name(name)),
                (None, None) => {
                    return Err(bad_request(format!(
                        "{what}.domain needs an id or a name, got {domain}"
                    )));
                }
            }
        }
        Some(_) => return Err(bad_request(format!("{what}.domain must be an object"))),
    };
    Ok(Reference::Name { name, domain })
}

/// What a `POST /v3/auth/tokens` body asks for.
enum Method {
    Password { user: Reference, password: String },
    Token { token: String },
}

struct AuthRequest {
    method: Method,
    project: Option<Reference>,
}

fn parse_auth(body: &[u8]) -> Result<AuthRequest, RestError> {
    let body: Value = serde_json::from_slice(body)
        .map_err(|error| bad_request(format!("the request body is not JSON: {error}")))?;
    let auth = body
        .get("auth")
        .filter(|auth| auth.is_object())
        .ok_or_else(|| bad_request("'auth' is a required property"))?;
    let identity = auth
        .get("identity")
        .filter(|identity| identity.is_object())
        .ok_or_else(|| bad_request("'identity' is a required property of auth"))?;
    let methods: Vec<&str> = identity
        .get("methods")
        .and_then(Value::as_array)
        .ok_or_else(|| bad_request("auth.identity.methods must be a list"))?
        .iter()
        .map(|method| method.as_str().unwrap_or_default())
        .collect();
    let method = match methods.as_slice() {
        [] => return Err(bad_request("auth.identity.methods must not be empty")),
        ["password"] => {
            let user = identity
                .pointer("/password/user")
                .ok_or_else(|| bad_request("auth.identity.password.user is required"))?;
            let password = user
                .get("password")
                .and_then(Value::as_str)
                .ok_or_else(|| bad_request("auth.identity.password.user.password is required"))?;
            Method::Password {
                user: reference_of(user, "auth.identity.password.user")?,
                password: password.to_owned(),
            }
        }
        ["token"] => {
            let token = identity
                .pointer("/token/id")
                .and_then(Value::as_str)
                .filter(|token| !token.is_empty())
                .ok_or_else(|| bad_request("auth.identity.token.id is required"))?;
            Method::Token {
                token: token.to_owned(),
            }
        }
        // Keystone's answer to methods it does not support.
        _ => {
            return Err(RestError::new(
                ErrorKind::Unauthenticated,
                format!(
                    "Attempted to authenticate with an unsupported method: {} (Ember supports password and token)",
                    ember_runtime::quote::quoted(&methods.join(", "))
                ),
            ));
        }
    };
    let project = match auth.get("scope") {
        None | Some(Value::Null) => None,
        Some(Value::String(unscoped)) if unscoped == "unscoped" => None,
        Some(Value::Object(scope)) => match scope.get("project") {
            Some(project) => Some(reference_of(project, "auth.scope.project")?),
            None => {
                return Err(RestError::new(
                    ErrorKind::Unauthenticated,
                    "Ember issues project-scoped tokens only: scope the request to a project",
                ));
            }
        },
        Some(_) => return Err(bad_request("auth.scope must be an object")),
    };
    Ok(AuthRequest { method, project })
}

/// Keystone's time format: `2026-11-25T10:00:00.000000Z`.
fn keystone_time(seconds: i64) -> String {
    DateTime::<Utc>::from_timestamp(seconds, 0)
        .unwrap_or_default()
        .format("%Y-%m-%dT%H:%M:%S%.6fZ")
        .to_string()
}

fn endpoints(region: &str, service: &str, url: &str) -> Value {
    let endpoints: Vec<Value> = ["public", "internal", "admin"]
        .iter()
        .map(|interface| {
            json!({
                "id": format!("{service}-{interface}"),
                "interface": interface,
                "region": region,
                "region_id": region,
                "url": url,
            })
        })
        .collect();
    Value::Array(endpoints)
}

/// The service catalog of a token for `project_id`.
fn catalog(state: &GatewayState, headers: &HeaderMap, project_id: &str) -> Value {
    let base = base_url(state, headers);
    let region = &state.identity.region;
    let service = |kind: &str, name: &str, url: String| {
        json!({
            "id": kind,
            "type": kind,
            "name": name,
            "endpoints": endpoints(region, kind, &url),
        })
    };
    json!([
        service("identity", "keystone", format!("{base}{PREFIX}")),
        service(
            "orchestration",
            "heat",
            format!("{base}/orchestration/v1/{project_id}")
        ),
        service("clustering", "senlin", format!("{base}/clustering")),
        service("ember-instance", "ember", format!("{base}/compute/v1")),
        // Zaqar's message post, for the queues of message receivers.
        service("messaging", "zaqar", format!("{base}/messaging")),
    ])
}

/// A token's body, as Keystone shows it.
async fn token_body(
    state: &GatewayState,
    headers: &HeaderMap,
    details: &TokenDetails,
    parent_audit_id: Option<&str>,
    with_catalog: bool,
) -> Value {
    let identity = &details.identity;
    // Tokens `ember token issue` minted carry no names: the store may
    // know them.
    let (mut user_name, mut project_name) =
        (details.user_name.clone(), details.project_name.clone());
    if let Some(directory) = state.authenticator.directory() {
        if user_name.is_none()
            && let Ok(Some(user)) = directory.store().user_by_id(&identity.user_id).await
        {
            user_name = Some(user.name);
        }
        if project_name.is_none()
            && let Ok(Some(project)) = directory.store().project_by_id(&identity.project_id).await
        {
            project_name = Some(project.name);
        }
    }
    let domain = json!({"id": DOMAIN_ID, "name": DOMAIN_NAME});
    let mut audit_ids = vec![Value::from(details.token_id.clone())];
    if let Some(parent) = parent_audit_id {
        audit_ids.push(parent.into());
    }
    let mut token = json!({
        "methods": if details.methods.is_empty() { vec!["token".to_owned()] } else { details.methods.clone() },
        "user": {
            "id": identity.user_id,
            "name": user_name.unwrap_or_else(|| identity.user_id.clone()),
            "domain": domain,
            "password_expires_at": null,
        },
        "project": {
            "id": identity.project_id,
            "name": project_name.unwrap_or_else(|| identity.project_id.clone()),
            "domain": domain,
        },
        "is_domain": false,
        "roles": identity.roles.iter().map(|role| json!({"id": role, "name": role})).collect::<Vec<_>>(),
        "expires_at": keystone_time(details.expires_at),
        "issued_at": keystone_time(details.issued_at),
        "audit_ids": audit_ids,
    });
    if with_catalog {
        token["catalog"] = catalog(state, headers, &identity.project_id);
    }
    json!({ "token": token })
}

fn wants_catalog(query: &HashMap<String, String>) -> bool {
    !query.contains_key("nocatalog")
}

/// 429 for an address asking for tokens too fast, in Keystone's error
/// shape, with when to try again.
fn too_many_requests(retry_after: Duration) -> Response {
    let seconds = retry_after.as_secs() + u64::from(retry_after.subsec_nanos() > 0);
    let message = format!("Too many token requests from this address: try again in {seconds} s.");
    let mut response = (
        StatusCode::TOO_MANY_REQUESTS,
        Json(json!({"error": {"code": 429, "title": "Too Many Requests", "message": message}})),
    )
        .into_response();
    response
        .headers_mut()
        .insert(header::RETRY_AFTER, HeaderValue::from(seconds.max(1)));
    response
}

/// `POST /identity/v3/auth/tokens`.
async fn issue(
    State(state): State<GatewayState>,
    source: Option<Extension<ConnectInfo<SocketAddr>>>,
    Query(query): Query<HashMap<String, String>>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, RestError> {
    if let Some(Extension(ConnectInfo(source))) = source
        && let Err(retry_after) = state.login_throttle.take(source.ip(), Instant::now())
    {
        state
            .metrics
            .logins_throttled
            .fetch_add(1, Ordering::Relaxed);
        tracing::info!(%source, "token request refused: the address asks too fast");
        return Ok(too_many_requests(retry_after));
    }
    let directory = directory(&state)?;
    let request = parse_auth(&body)?;
    let (login, methods, parent) = match &request.method {
        Method::Password { user, password } => (
            directory
                .password_login(user, password, request.project.as_ref())
                .await,
            vec!["password".to_owned()],
            None,
        ),
        Method::Token { token } => {
            let details = match state.authenticator.verify_details(token) {
                Ok(details) => details,
                Err(error) => {
                    tracing::info!(%error, "token authentication refused");
                    return Err(unauthorized());
                }
            };
            (
                directory
                    .token_login(&details, request.project.as_ref())
                    .await,
                vec!["token".to_owned()],
                Some(details.token_id),
            )
        }
    };
    let login = match login {
        Ok(login) => login,
        Err(LoginFailure::Store(error)) => {
            return Err(RestError::new(error.kind(), error.to_string()));
        }
        Err(failure) => {
            if matches!(failure, LoginFailure::Locked(_)) {
                state.metrics.logins_locked.fetch_add(1, Ordering::Relaxed);
            }
            tracing::info!(reason = %failure, "authentication refused");
            return Err(unauthorized());
        }
    };
    let details = Directory::token_details(&login, methods, state.identity.token_ttl);
    let token = state
        .authenticator
        .signer()
        .issue_details(&details)
        .map_err(|error| RestError::new(ErrorKind::Internal, error.to_string()))?;
    let body = token_body(
        &state,
        &headers,
        &details,
        parent.as_deref(),
        wants_catalog(&query),
    )
    .await;
    let mut response = (StatusCode::CREATED, Json(body)).into_response();
    if let Ok(value) = http::HeaderValue::from_str(&token) {
        response.headers_mut().insert(SUBJECT_TOKEN_HEADER, value);
    }
    Ok(response)
}

/// The caller's token and the subject token of a validate or revoke call:
/// the caller may act on its own tokens, admins and services on anyone's.
fn caller_and_subject(
    state: &GatewayState,
    headers: &HeaderMap,
) -> Result<TokenDetails, RestError> {
    let caller = crate::auth::token_of(headers)
        .and_then(|token| {
            if token.is_empty() {
                Err(AuthError::Missing)
            } else {
                state.authenticator.verify_details(token)
            }
        })
        .map_err(|error| RestError::new(error.kind(), error.to_string()))?;
    let subject = headers
        .get(SUBJECT_TOKEN_HEADER)
        .and_then(|value| value.to_str().ok())
        .map(str::trim)
        .filter(|token| !token.is_empty())
        .ok_or_else(|| bad_request("X-Subject-Token names the token to check"))?;
    let subject = state
        .authenticator
        .verify_details(subject)
        .map_err(|error| {
            RestError::new(
                ErrorKind::NotFound,
                format!("Could not find token: {error}"),
            )
        })?;
    let privileged = caller
        .identity
        .roles
        .iter()
        .any(|role| role == "admin" || role == "service");
    if !privileged && caller.identity.user_id != subject.identity.user_id {
        return Err(RestError::new(
            ErrorKind::Forbidden,
            "You are not authorized to perform the requested action: only admins, services and the token's own user may check or revoke it",
        ));
    }
    Ok(subject)
}

/// `GET` and `HEAD /identity/v3/auth/tokens`.
async fn validate(
    State(state): State<GatewayState>,
    Query(query): Query<HashMap<String, String>>,
    headers: HeaderMap,
) -> Result<Response, RestError> {
    directory(&state)?;
    let subject = caller_and_subject(&state, &headers)?;
    let body = token_body(&state, &headers, &subject, None, wants_catalog(&query)).await;
    let mut response = Json(body).into_response();
    if let Some(value) = headers.get(SUBJECT_TOKEN_HEADER) {
        response
            .headers_mut()
            .insert(SUBJECT_TOKEN_HEADER, value.clone());
    }
    Ok(response)
}

/// `DELETE /identity/v3/auth/tokens`: the subject token is refused from
/// then on, by every replica.
async fn revoke(
    State(state): State<GatewayState>,
    headers: HeaderMap,
) -> Result<StatusCode, RestError> {
    let directory = directory(&state)?;
    let subject = caller_and_subject(&state, &headers)?;
    directory
        .revoke(&subject)
        .await
        .map_err(|error| RestError::new(error.kind(), error.to_string()))?;
    Ok(StatusCode::NO_CONTENT)
}

fn own_token(state: &GatewayState, headers: &HeaderMap) -> Result<TokenDetails, RestError> {
    directory(state)?;
    crate::auth::token_of(headers)
        .and_then(|token| state.authenticator.verify_details(token))
        .map_err(|error| RestError::new(error.kind(), error.to_string()))
}

/// `GET /identity/v3/auth/catalog`: the caller's token's catalog.
async fn catalog_of_token(
    State(state): State<GatewayState>,
    headers: HeaderMap,
) -> Result<Json<Value>, RestError> {
    let details = own_token(&state, &headers)?;
    let base = base_url(&state, &headers);
    Ok(Json(json!({
        "catalog": catalog(&state, &headers, &details.identity.project_id),
        "links": {"self": format!("{base}{PREFIX}/v3/auth/catalog"), "previous": null, "next": null},
    })))
}

/// `GET /identity/v3/auth/projects`: the enabled projects the caller's
/// user has a role on, its own or through a group.
async fn projects_of_token(
    State(state): State<GatewayState>,
    headers: HeaderMap,
) -> Result<Json<Value>, RestError> {
    let details = own_token(&state, &headers)?;
    let directory = directory(&state)?;
    let store_error =
        |error: crate::identity::IdentityError| RestError::new(error.kind(), error.to_string());
    let base = base_url(&state, &headers);
    let projects: Vec<Value> = directory
        .store()
        .projects_of(&details.identity.user_id)
        .await
        .map_err(store_error)?
        .into_iter()
        .map(|project| {
            json!({
                "id": project.id,
                "name": project.name,
                "description": project.description,
                "domain_id": DOMAIN_ID,
                "enabled": project.enabled,
                "is_domain": false,
                "parent_id": DOMAIN_ID,
                "links": {"self": format!("{base}{PREFIX}/v3/projects/{}", project.id)},
            })
        })
        .collect();
    Ok(Json(json!({
        "projects": projects,
        "links": {"self": format!("{base}{PREFIX}/v3/auth/projects"), "previous": null, "next": null},
    })))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn auth_bodies_are_read_as_keystone_reads_them() {
        let body = json!({"auth": {
            "identity": {"methods": ["password"], "password": {"user": {
                "name": "demo", "domain": {"name": "Default"}, "password": "secret-1"}}},
            "scope": {"project": {"name": "demo", "domain": {"id": "default"}}},
        }});
        let request = parse_auth(body.to_string().as_bytes()).expect("parsed");
        match request.method {
            Method::Password { user, password } => {
                assert_eq!(password, "secret-1");
                assert_eq!(
                    user,
                    Reference::Name {
                        name: "demo".into(),
                        domain: Some(Domain::Name("Default".into()))
                    }
                );
            }
            Method::Token { .. } => panic!("password expected"),
        }
        assert_eq!(
            request.project,
            Some(Reference::Name {
                name: "demo".into(),
                domain: Some(Domain::Id("default".into()))
            })
        );
        let by_id = json!({"auth": {"identity": {"methods": ["token"], "token": {"id": "abc"}},
            "scope": {"project": {"id": "p1"}}}});
        let request = parse_auth(by_id.to_string().as_bytes()).expect("parsed");
        assert!(matches!(request.method, Method::Token { ref token } if token == "abc"));
        assert_eq!(request.project, Some(Reference::Id("p1".into())));
    }

    #[test]
    fn malformed_bodies_and_unknown_methods_name_the_problem() {
        let cases = [
            ("not json", "not JSON"),
            ("{}", "'auth' is a required property"),
            (r#"{"auth": {}}"#, "'identity' is a required property"),
            (
                r#"{"auth": {"identity": {"methods": []}}}"#,
                "must not be empty",
            ),
            (
                r#"{"auth": {"identity": {"methods": ["password"]}}}"#,
                "password.user is required",
            ),
            (
                r#"{"auth": {"identity": {"methods": ["password"], "password": {"user": {"name": "x"}}}}}"#,
                "user.password is required",
            ),
            (
                r#"{"auth": {"identity": {"methods": ["totp"]}}}"#,
                "unsupported method: totp",
            ),
            (
                r#"{"auth": {"identity": {"methods": ["token"], "token": {"id": "t"}}, "scope": {"domain": {"id": "default"}}}}"#,
                "project-scoped tokens only",
            ),
        ];
        for (body, expected) in cases {
            let Err(error) = parse_auth(body.as_bytes()) else {
                panic!("{body} parsed");
            };
            assert!(
                error.message().contains(expected),
                "{body}: {}",
                error.message()
            );
            let status = error.into_response().status();
            assert!(
                status == StatusCode::BAD_REQUEST || status == StatusCode::UNAUTHORIZED,
                "{body}: {status}"
            );
        }
    }

    #[test]
    fn times_are_in_keystones_format() {
        assert_eq!(keystone_time(0), "1970-01-01T00:00:00.000000Z");
    }
}
