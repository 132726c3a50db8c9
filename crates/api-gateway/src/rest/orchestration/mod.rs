//! The Orchestration API v1 (Heat), at `/orchestration/v1/{project_id}`.
//! Request and response bodies follow Heat's so python-heatclient and the
//! `openstack stack` commands work unchanged. Every route authenticates,
//! checks that the URL's project is the token's ([`HeatCaller`]) and calls
//! the engine over gRPC with the caller's identity; this module only
//! translates.
//!
//! Routes follow Heat's: a stack is addressed canonically as
//! `/stacks/{name}/{id}`; `/stacks/{name or id}` (any method) and a few
//! sub-paths addressed by name alone answer `302 Found` to the canonical URL,
//! query string kept. It must be 302 with an absolute `Location` that starts
//! with the client's endpoint: python-heatclient follows only 301/302/305,
//! re-sending the same method, and refuses any other location.

mod catalog;
mod events;
mod heat_request;
mod heat_view;
/// Heat's validate answer from the engine's (the CLI prints it too).
pub use heat_view::validation as validation_view;
pub mod protobuf_json;
pub mod resources;
mod snapshots;
mod software;
mod stack_data;
mod stacks;

use std::convert::Infallible;

use axum::Router;
use axum::extract::{FromRequestParts, Path, RawPathParams, State};
use axum::http::request::Parts;
use axum::response::{IntoResponse, Response};
use axum::routing::{any, delete, get, post};
use ember_proto::engine::v1 as pb;
use ember_proto::engine::v1::event_service_client::EventServiceClient;
use ember_proto::engine::v1::resource_service_client::ResourceServiceClient;
use ember_proto::engine::v1::stack_service_client::StackServiceClient;
use ember_runtime::in_process::Upstream;
use ember_runtime::{ErrorKind, Identity};
use serde::Deserialize;

use self::heat_view::HeatUrls;
use super::Authenticated;
use crate::GatewayState;
use crate::error::RestError;

/// Sub-paths that `GET /stacks/{name}/{sub-path}` redirects to the
/// canonical stack URL, as Heat does (`outputs` is Ember's addition).
const LOOKUP_SUBPATHS_GET: &[&str] = &[
    "resources",
    "events",
    "template",
    "actions",
    "environment",
    "files",
    "outputs",
];
/// The ones `POST` redirects (only `actions` has a POST handler behind it).
const LOOKUP_SUBPATHS_POST: &[&str] = &["resources", "events", "template", "actions"];

/// `GET /orchestration` and `/orchestration/`: Heat's root, 300 with its
/// one API version (`v1.0`, at `/orchestration/v1/`), no token needed.
pub async fn versions(State(state): State<GatewayState>, headers: http::HeaderMap) -> Response {
    let base = if state.identity.public_url.is_empty() {
        headers
            .get(http::header::HOST)
            .and_then(|host| host.to_str().ok())
            .map(|host| format!("http://{host}"))
            .unwrap_or_default()
    } else {
        state.identity.public_url.trim_end_matches('/').to_owned()
    };
    (
        http::StatusCode::MULTIPLE_CHOICES,
        axum::Json(serde_json::json!({"versions": [{
            "id": "v1.0",
            "status": "CURRENT",
            "links": [{"rel": "self", "href": format!("{base}/orchestration/v1/")}],
        }]})),
    )
        .into_response()
}

pub fn routes() -> Router<GatewayState> {
    let mut router = Router::new()
        .route(
            "/stacks",
            get(stacks::list_stacks).post(stacks::create_stack),
        )
        .route(
            "/stacks/preview",
            post(stacks::preview_stack).get(lookup_stack_named_preview),
        )
        .route("/stacks/{stack_name}", any(lookup_stack))
        .route("/audit", get(super::audit::list_in_project))
        .route("/plugins", get(super::plugins::list))
        .route(
            "/plugins/{name}",
            get(super::plugins::show).patch(super::plugins::update),
        )
        .route("/quotas", get(super::quotas::show).put(super::quotas::set))
        .route(
            "/stacks/{stack_name}/{stack_id}",
            get(stacks::show_stack)
                .put(stacks::update_stack)
                .patch(stacks::patch_stack)
                .delete(stacks::delete_stack),
        )
        .route(
            "/stacks/{stack_name}/{stack_id}/preview",
            axum::routing::put(stacks::preview_update).patch(stacks::preview_update),
        )
        .route(
            "/stacks/{stack_name}/{stack_id}/export",
            get(stacks::export_stack),
        )
        .route(
            "/stacks/{stack_name}/{stack_id}/snapshots",
            get(snapshots::list_snapshots).post(snapshots::create_snapshot),
        )
        .route(
            "/stacks/{stack_name}/{stack_id}/snapshots/{snapshot_id}",
            get(snapshots::show_snapshot).delete(snapshots::delete_snapshot),
        )
        .route(
            "/stacks/{stack_name}/{stack_id}/snapshots/{snapshot_id}/restore",
            post(snapshots::restore_snapshot),
        )
        .route(
            "/stacks/{stack_name}/{stack_id}/abandon",
            delete(stacks::abandon_stack),
        )
        .route(
            "/stacks/{stack_name}/{stack_id}/actions",
            post(stacks::run_stack_action),
        )
        .route(
            "/stacks/{stack_name}/{stack_id}/actions/{action}/allowed",
            get(stacks::check_stack_operation),
        )
        .route(
            "/stacks/{stack_name}/{stack_id}/template",
            get(stack_data::template),
        )
        .route(
            "/stacks/{stack_name}/{stack_id}/environment",
            get(stack_data::environment),
        )
        .route(
            "/stacks/{stack_name}/{stack_id}/files",
            get(stack_data::files),
        )
        .route(
            "/stacks/{stack_name}/{stack_id}/outputs",
            get(stack_data::list_outputs),
        )
        .route(
            "/stacks/{stack_name}/{stack_id}/outputs/{output_key}",
            get(stack_data::show_output),
        )
        .route(
            "/stacks/{stack_name}/{stack_id}/resources",
            get(resources::list_resources),
        )
        .route(
            "/stacks/{stack_name}/{stack_id}/resources/{resource_name}",
            get(resources::show_resource).patch(resources::mark_unhealthy),
        )
        .route(
            "/stacks/{stack_name}/{stack_id}/resources/{resource_name}/signal",
            post(resources::signal_resource),
        )
        .route(
            "/stacks/{stack_name}/{stack_id}/resources/{resource_name}/metadata",
            get(resources::resource_metadata),
        )
        .route(
            "/stacks/{stack_name}/{stack_id}/events",
            get(events::list_stack_events),
        )
        .route(
            "/stacks/{stack_name}/{stack_id}/resources/{resource_name}/events",
            get(events::list_resource_events),
        )
        .route(
            "/stacks/{stack_name}/{stack_id}/resources/{resource_name}/events/{event_id}",
            get(events::show_event),
        )
        .route("/resource_types", get(catalog::list_resource_types))
        .route(
            "/resource_types/{type_name}",
            get(catalog::show_resource_type),
        )
        .route(
            "/resource_types/{type_name}/template",
            get(catalog::resource_type_template),
        )
        .route(
            "/software_configs",
            get(software::list_configs).post(software::create_config),
        )
        .route(
            "/software_configs/{config_id}",
            get(software::show_config).delete(software::delete_config),
        )
        .route(
            "/software_deployments",
            get(software::list_deployments).post(software::create_deployment),
        )
        .route(
            "/software_deployments/metadata/{server_id}",
            get(software::server_metadata),
        )
        .route(
            "/software_deployments/{deployment_id}",
            get(software::show_deployment)
                .put(software::update_deployment)
                .delete(software::delete_deployment),
        )
        .route("/template_versions", get(catalog::list_template_versions))
        .route(
            "/template_versions/{template_version}/functions",
            get(catalog::list_template_functions),
        )
        .route("/validate", post(catalog::validate_template))
        .route("/build_info", get(catalog::build_info));
    for subpath in LOOKUP_SUBPATHS_GET {
        let handler = if LOOKUP_SUBPATHS_POST.contains(subpath) {
            get(lookup_stack_subpath).post(lookup_stack_subpath)
        } else {
            get(lookup_stack_subpath)
        };
        router = router.route(&format!("/stacks/{{stack_name}}/{subpath}"), handler);
    }
    router
}

/// The caller of a Heat route: authenticated (401 otherwise), allowed in
/// the URL's project (403 otherwise), with that project's URLs.
pub struct HeatCaller {
    pub identity: Identity,
    pub urls: HeatUrls,
}

impl FromRequestParts<GatewayState> for HeatCaller {
    type Rejection = RestError;

    async fn from_request_parts(
        parts: &mut Parts,
        state: &GatewayState,
    ) -> Result<Self, RestError> {
        let Authenticated(identity) = Authenticated::from_request_parts(parts, state).await?;
        let params = RawPathParams::from_request_parts(parts, state)
            .await
            .map_err(|error| RestError::new(ErrorKind::InvalidInput, error.body_text()))?;
        let project_id = params
            .iter()
            .find(|(name, _)| *name == "project_id")
            .map(|(_, value)| value.to_owned())
            .unwrap_or_default();
        check_project(&identity, &project_id)?;
        let Ok(PublicOrigin(origin)) = PublicOrigin::from_request_parts(parts, state).await;
        Ok(HeatCaller {
            identity,
            urls: HeatUrls::new(&origin, &project_id),
        })
    }
}

/// Heat refuses a token scoped to another project than the URL names.
fn check_project(identity: &Identity, project_id: &str) -> Result<(), RestError> {
    if identity.project_id == project_id || identity.is_admin() {
        Ok(())
    } else {
        Err(RestError::new(
            ErrorKind::Forbidden,
            format!(
                "the URL names project {project_id:?} but the token is scoped to {:?}",
                identity.project_id
            ),
        ))
    }
}

/// `scheme://host[:port]` as the caller reached the gateway (honouring a
/// proxy's `X-Forwarded-Proto`/`-Host`); empty when unknown, which makes
/// links relative.
pub struct PublicOrigin(pub String);

impl<S: Send + Sync> FromRequestParts<S> for PublicOrigin {
    type Rejection = Infallible;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, Infallible> {
        let header = |name: &str| {
            parts
                .headers
                .get(name)
                .and_then(|value| value.to_str().ok())
                .and_then(|value| value.split(',').next())
                .map(str::trim)
                .filter(|value| !value.is_empty())
                .map(str::to_owned)
        };
        let scheme = header("x-forwarded-proto").unwrap_or_else(|| "http".to_owned());
        let host = header("x-forwarded-host")
            .or_else(|| header("host"))
            .or_else(|| parts.uri.authority().map(ToString::to_string));
        Ok(PublicOrigin(
            host.map(|host| format!("{scheme}://{host}"))
                .unwrap_or_default(),
        ))
    }
}

/// `{stack_name}/{stack_id}` of a canonical stack URL.
#[derive(Debug, Deserialize)]
pub struct StackPath {
    pub stack_name: String,
    pub stack_id: String,
}

#[derive(Debug, Deserialize)]
struct StackLookupPath {
    stack_name: String,
}

/// A 200 JSON response written into a buffer of `capacity` bytes (axum's
/// `Json` starts at 128 and doubles): for large bodies like lists.
pub fn json_response(body: &impl serde::Serialize, capacity: usize) -> Response {
    let mut buffer = Vec::with_capacity(capacity);
    match serde_json::to_writer(&mut buffer, body) {
        Ok(()) => (
            [(
                http::header::CONTENT_TYPE,
                http::HeaderValue::from_static("application/json"),
            )],
            buffer,
        )
            .into_response(),
        Err(error) => RestError::new(
            ErrorKind::Internal,
            format!("the response could not be written: {error}"),
        )
        .into_response(),
    }
}

pub fn stack_service(state: &GatewayState) -> StackServiceClient<Upstream> {
    StackServiceClient::new(state.upstreams.engine.clone())
        .max_decoding_message_size(ember_runtime::server::MAX_MESSAGE_BYTES)
}

pub fn resource_service(state: &GatewayState) -> ResourceServiceClient<Upstream> {
    ResourceServiceClient::new(state.upstreams.engine.clone())
        .max_decoding_message_size(ember_runtime::server::MAX_MESSAGE_BYTES)
}

pub fn event_service(state: &GatewayState) -> EventServiceClient<Upstream> {
    EventServiceClient::new(state.upstreams.engine.clone())
        .max_decoding_message_size(ember_runtime::server::MAX_MESSAGE_BYTES)
}

/// One stack by name or id.
pub async fn get_stack(
    state: &GatewayState,
    identity: &Identity,
    stack: String,
) -> Result<pb::Stack, RestError> {
    Ok(stack_service(state)
        .get_stack(state.internal_request(identity, pb::GetStackRequest { stack }))
        .await?
        .into_inner())
}

/// The stack a canonical URL names. As in Heat, the name must be the
/// stack's: `/stacks/other-name/{id}` is a 404, not a way around a typo.
pub async fn identified_stack(
    state: &GatewayState,
    identity: &Identity,
    path: &StackPath,
) -> Result<pb::Stack, RestError> {
    // Only the name is checked here: the cheap lookup, not the full view
    // with outputs resolved.
    let found = stack_service(state)
        .identify_stack(state.internal_request(
            identity,
            pb::GetStackRequest {
                stack: path.stack_id.clone(),
            },
        ))
        .await?
        .into_inner();
    if found.name != path.stack_name || found.id != path.stack_id {
        return Err(RestError::new(
            ErrorKind::NotFound,
            format!(
                "stack {:?} with id {} not found",
                path.stack_name, path.stack_id
            ),
        ));
    }
    Ok(found)
}

/// `ANY /stacks/{name or id}` → 302 to `/stacks/{name}/{id}`.
async fn lookup_stack(
    State(state): State<GatewayState>,
    caller: HeatCaller,
    Path(path): Path<StackLookupPath>,
    uri: http::Uri,
) -> Result<Response, RestError> {
    redirect_to_stack(&state, &caller, path.stack_name, None, uri.query()).await
}

/// `GET /stacks/preview` is a lookup of a stack named "preview" (the
/// static route for `POST /stacks/preview` takes the path first).
async fn lookup_stack_named_preview(
    State(state): State<GatewayState>,
    caller: HeatCaller,
    uri: http::Uri,
) -> Result<Response, RestError> {
    redirect_to_stack(&state, &caller, "preview".to_owned(), None, uri.query()).await
}

/// `GET|POST /stacks/{name or id}/{sub-path}` → 302 to the canonical URL
/// of the sub-path.
async fn lookup_stack_subpath(
    State(state): State<GatewayState>,
    caller: HeatCaller,
    Path(path): Path<StackLookupPath>,
    uri: http::Uri,
) -> Result<Response, RestError> {
    let subpath = uri.path().rsplit('/').next().map(str::to_owned);
    redirect_to_stack(&state, &caller, path.stack_name, subpath, uri.query()).await
}

async fn redirect_to_stack(
    state: &GatewayState,
    caller: &HeatCaller,
    stack: String,
    subpath: Option<String>,
    query: Option<&str>,
) -> Result<Response, RestError> {
    let found = get_stack(state, &caller.identity, stack).await?;
    let mut location = caller.urls.stack(&found.name, &found.id);
    if let Some(subpath) = subpath {
        location = format!("{location}/{subpath}");
    }
    if let Some(query) = query.filter(|query| !query.is_empty()) {
        location = format!("{location}?{query}");
    }
    Ok((
        http::StatusCode::FOUND,
        [(http::header::LOCATION, location)],
    )
        .into_response())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_route_mounts_without_conflict() {
        // axum panics on conflicting routes when they are added.
        let _router: Router<GatewayState> = routes();
    }

    async fn origin_of(headers: &[(&str, &str)]) -> String {
        let mut request = http::Request::builder().uri("/orchestration/v1/demo/stacks");
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        let (mut parts, ()) = request.body(()).expect("request").into_parts();
        let Ok(PublicOrigin(origin)) = PublicOrigin::from_request_parts(&mut parts, &()).await;
        origin
    }

    #[tokio::test]
    async fn links_start_where_the_caller_reached_the_gateway() {
        assert_eq!(
            origin_of(&[("host", "127.0.0.1:8004")]).await,
            "http://127.0.0.1:8004"
        );
        assert_eq!(
            origin_of(&[
                ("host", "10.0.0.5:8004"),
                ("x-forwarded-proto", "https"),
                ("x-forwarded-host", "heat.example.org, proxy.local"),
            ])
            .await,
            "https://heat.example.org"
        );
        assert_eq!(origin_of(&[]).await, "", "unknown: links stay relative");
    }

    #[test]
    fn another_projects_url_is_forbidden_unless_admin() {
        let member = Identity::new("u", "demo", vec!["member".to_owned()]);
        assert!(check_project(&member, "demo").is_ok());
        let refused = check_project(&member, "other").expect_err("forbidden");
        assert!(format!("{refused:?}").contains("Forbidden"));
        let admin = Identity::new("a", "demo", vec!["admin".to_owned()]);
        assert!(check_project(&admin, "other").is_ok());
    }
}
