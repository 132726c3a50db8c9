//! The public gRPC door. Health and reflection are answered here (no token
//! needed, so `grpcurl list` works), and so is the built-in identity's
//! admin service (admins, and other Ember services acting for a user who
//! holds the admin role); every other call must carry a token, and
//! is forwarded byte for byte to the internal service that serves it, with
//! the verified identity and the internal credential in its metadata.
//! Forwarding at the HTTP/2 level keeps the gateway free of per-RPC code: a
//! new RPC in a proto is public as soon as its service is listed in
//! [`crate::upstream`]. The rule of roles ([`crate::roles`]) is applied
//! here to every forwarded method, by its name.

use std::sync::atomic::Ordering;

use axum::body::Body;
use axum::response::Response;
use ember_runtime::Identity;
use ember_runtime::identity::{INTERNAL_CREDENTIAL_HEADER, InternalAuth, ROLES_HEADER};
use http::Request;
use tonic::service::Interceptor;
use tower::ServiceExt;

use crate::GatewayState;

const HEALTH_PREFIX: &str = "/grpc.health.v1.Health/";
const REFLECTION_PREFIX: &str = "/grpc.reflection.";

/// True for requests that speak gRPC (`content-type: application/grpc…`).
pub fn is_grpc<B>(request: &Request<B>) -> bool {
    request
        .headers()
        .get(http::header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .is_some_and(|value| value.starts_with("application/grpc"))
}

pub async fn handle(state: GatewayState, request: Request<Body>) -> Response {
    state.metrics.grpc_requests.fetch_add(1, Ordering::Relaxed);
    let response = route(state.clone(), request).await;
    count_refusal(&state, &response);
    response
}

/// Counts, in one place for every gRPC call, an answer that refused the
/// caller's credentials: UNAUTHENTICATED, whoever said it (the token check
/// here, the identity admin service's check of the internal credential).
fn count_refusal(state: &GatewayState, response: &Response) {
    let code = response
        .headers()
        .get("grpc-status")
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.parse::<i32>().ok());
    if code == Some(tonic::Code::Unauthenticated as i32) {
        state
            .metrics
            .unauthenticated
            .fetch_add(1, Ordering::Relaxed);
    }
}

/// The call to whoever answers it: health and reflection here, the
/// identity admin service here, every other service upstream.
async fn route(state: GatewayState, mut request: Request<Body>) -> Response {
    let path = request.uri().path();
    if path.starts_with(HEALTH_PREFIX) || path.starts_with(REFLECTION_PREFIX) {
        return match state.local_grpc.clone().oneshot(request).await {
            Ok(response) => response,
            Err(never) => match never {},
        };
    }
    if path.starts_with(IDENTITY_ADMIN_PREFIX) {
        return identity_admin(state, request).await;
    }
    let Some(channel) = state.upstreams.for_path(path).cloned() else {
        let service = path
            .trim_start_matches('/')
            .split('/')
            .next()
            .unwrap_or_default();
        return status_response(tonic::Status::unimplemented(format!(
            "unknown service {service:?}: `grpcurl -plaintext HOST:PORT list` shows the public ones"
        )));
    };
    let identity = match state.authenticator.authenticate(request.headers()).await {
        Ok(identity) => identity,
        Err(error) => return refused(&error),
    };
    let path = request.uri().path();
    if crate::roles::grpc_access(path) == crate::roles::Access::Write
        && let Some(refusal) = crate::roles::write_refusal(&identity, &format!("call {path}"))
    {
        tracing::info!(
            user_id = %identity.user_id,
            project_id = %identity.project_id,
            method = %path,
            "a reader's write refused"
        );
        return status_response(tonic::Status::permission_denied(refusal));
    }
    if crate::roles::grpc_access(path) == crate::roles::Access::Write
        && let Some(value) = request
            .headers()
            .get(ember_runtime::call_context::BREAK_GLASS_HEADER)
        && let Some((kind, refusal)) =
            ember_runtime::call_context::break_glass_refusal(&identity, value.as_bytes())
    {
        return status_response(kind.status(refusal));
    }
    let subject_token = match &state.authenticator {
        crate::auth::Authenticator::Keystone { .. } => {
            crate::auth::keystone_token_of(request.headers())
                .map(ember_runtime::identity::SubjectToken::new)
        }
        crate::auth::Authenticator::BuiltIn { .. } => None,
    };
    identity.write_headers(&state.credential, request.headers_mut());
    if let Some(token) = subject_token {
        token.write_header(request.headers_mut());
    }
    request.headers_mut().remove(http::header::AUTHORIZATION);
    request.headers_mut().remove(crate::auth::AUTH_TOKEN_HEADER);
    match channel.oneshot(request.map(tonic::body::Body::new)).await {
        Ok(response) => response.map(Body::new),
        Err(error) => {
            state
                .metrics
                .upstream_errors
                .fetch_add(1, Ordering::Relaxed);
            tracing::warn!(%error, "upstream gRPC call failed");
            status_response(tonic::Status::unavailable(format!(
                "the service behind the gateway is unavailable: {error}"
            )))
        }
    }
}

const IDENTITY_ADMIN_PREFIX: &str = "/ember.identity.v1.IdentityAdminService/";

fn refused(error: &crate::auth::AuthError) -> Response {
    status_response(tonic::Status::new(
        error.kind().grpc_code(),
        error.to_string(),
    ))
}

/// The built-in identity's admin service, served here: to admin tokens,
/// and to other Ember services acting for a user (see
/// [`internal_identity_admin`]).
async fn identity_admin(state: GatewayState, mut request: Request<Body>) -> Response {
    let Some(service) = state.identity_grpc.clone() else {
        return status_response(tonic::Status::unimplemented(
            "this gateway validates tokens against an external Keystone: manage identities there",
        ));
    };
    if request.headers().contains_key(INTERNAL_CREDENTIAL_HEADER) {
        if let Err(refusal) = internal_identity_admin(&state, request.headers()).await {
            return status_response(refusal);
        }
    } else {
        let identity = match state.authenticator.authenticate(request.headers()).await {
            Ok(identity) => identity,
            Err(error) => return refused(&error),
        };
        if !identity.is_admin() {
            return status_response(tonic::Status::permission_denied(format!(
                "managing identities needs the admin role: the token of user {:?} in project {:?} holds {}",
                identity.user_id,
                identity.project_id,
                if identity.roles.is_empty() {
                    "none".to_owned()
                } else {
                    identity.roles.join(", ")
                }
            )));
        }
    }
    // The handler trusts nothing the caller sent about who it is.
    ember_runtime::identity::strip_identity_headers(request.headers_mut());
    match service.oneshot(request).await {
        Ok(response) => response,
        Err(never) => match never {},
    }
}

/// A call from another Ember service (the engine's `OS::Keystone::*`
/// resource types) acting for a stack's owner: it carries the internal
/// credential and the identity headers instead of a token. The credential
/// is checked as every internal service checks it; the roles the headers
/// claim are not taken — the directory says now whether the user holds
/// `admin` in the project (its own or through a group), and whether both
/// exist and are enabled.
async fn internal_identity_admin(
    state: &GatewayState,
    headers: &http::HeaderMap,
) -> Result<(), tonic::Status> {
    let Some(directory) = state.authenticator.directory() else {
        return Err(tonic::Status::unimplemented(
            "this gateway validates tokens against an external Keystone: manage identities there",
        ));
    };
    // The interceptor wants a roles header; the roles claimed are blanked,
    // so that nothing below could take them.
    let mut claimed = headers.clone();
    claimed.insert(ROLES_HEADER, http::HeaderValue::from_static(""));
    let request = tonic::Request::from_parts(
        tonic::metadata::MetadataMap::from_headers(claimed),
        tonic::Extensions::default(),
        (),
    );
    let request = InternalAuth::new(state.credential.clone()).call(request)?;
    let identity = Identity::of(&request)?;
    directory
        .check_identity_admin(&identity.user_id, &identity.project_id)
        .await
        .map_err(|error| {
            tracing::info!(
                user_id = %identity.user_id,
                project_id = %identity.project_id,
                %error,
                "an internal service's identity call refused"
            );
            error.into_status()
        })
}

fn status_response(status: tonic::Status) -> Response {
    status.into_http::<Body>()
}
