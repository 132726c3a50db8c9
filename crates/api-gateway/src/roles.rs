//! The one rule of roles, enforced at the door for every REST route and
//! every gRPC method: a caller holding `reader` but neither `member` nor
//! `admin` ([`Identity::is_read_only`]) may read and never change anything
//! (Keystone's default roles nest reader ⊂ member ⊂ admin; Heat's default
//! policies give `PROJECT_READER` the reads and `PROJECT_MEMBER` the
//! writes).
//!
//! Checked here, once, rather than by each handler or each engine
//! operation, so that a new route or RPC cannot forget it: what is a read
//! is listed (GET and the few calls that change nothing although they POST,
//! or RPCs named like reads), and **everything else is a write**. The
//! engine's own admission functions keep refusing readers too (same rule,
//! [`Identity::is_read_only`]), as a second line behind this one.
//!
//! Routes whose credential is in the URL (a wait condition handle's signal
//! URL, a Senlin webhook, the Keystone front door's token calls) are not a
//! user's writes: whoever holds the URL may call them, as in Heat and
//! Senlin, and their handlers check that credential.

use axum::extract::{MatchedPath, Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use ember_runtime::{ErrorKind, Identity};
use http::Method;

use crate::GatewayState;
use crate::error::RestError;

/// What a call does, as far as roles are concerned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// Changes nothing: any role of the project may call it.
    Read,
    /// Changes something: a reader is refused (403 / PERMISSION_DENIED).
    Write,
    /// Authorized by a credential in its URL, not by the caller's roles.
    CredentialInUrl,
}

/// The REST calls that change nothing although their method is not GET:
/// Heat's preview of a new stack (a reader's in Heat's default policy),
/// Heat's template validation and Senlin's spec validation (a member's in
/// Heat; Ember lets a reader check a template it could read anyway). The
/// previews of an update and of an adoption stay writes, as in Heat: they
/// tell what the caller is about to change.
pub const READ_ONLY_WRITES: &[(&str, &str)] = &[
    ("POST", "/orchestration/v1/{project_id}/stacks/preview"),
    ("POST", "/orchestration/v1/{project_id}/validate"),
    ("POST", "/clustering/v1/profiles/validate"),
    ("POST", "/clustering/v1/policies/validate"),
];

/// Routes authorized by a credential in their URL (see the module header).
pub const CREDENTIAL_IN_URL: &[&str] = &[
    "/orchestration/v1/signals/{stack_id}/{handle_id}",
    "/clustering/v1/webhooks/{id}/trigger",
    "/identity/v3/auth/tokens",
];

/// What the REST call `method` on the route pattern `route` does.
pub fn rest_access(method: &Method, route: &str) -> Access {
    if CREDENTIAL_IN_URL.contains(&route) {
        return Access::CredentialInUrl;
    }
    // TRACE and CONNECT are answered 405 by every route; they change
    // nothing.
    if matches!(
        *method,
        Method::GET | Method::HEAD | Method::OPTIONS | Method::TRACE | Method::CONNECT
    ) {
        return Access::Read;
    }
    if READ_ONLY_WRITES
        .iter()
        .any(|(listed_method, listed_route)| {
            *listed_method == method.as_str() && *listed_route == route
        })
    {
        return Access::Read;
    }
    Access::Write
}

/// The gRPC method names that read: a name starting with one of these
/// verbs, or one of [`READ_METHODS`]. Any other method is a write.
pub const READ_VERBS: &[&str] = &["Get", "List", "Identify", "Validate"];

/// Read methods whose name does not start with a read verb (the REST
/// calls' twins: see [`READ_ONLY_WRITES`]).
pub const READ_METHODS: &[&str] = &[
    "PreviewStack",
    "WhoAmI",
    "CheckOperation",
    "CheckClusterOperation",
    "CheckNodeOperation",
    "CheckInstanceOperation",
    "ExportStack",
    "CollectClusterAttributes",
];

/// What the gRPC call at `path` (`/package.Service/Method`) does.
pub fn grpc_access(path: &str) -> Access {
    let method = path.rsplit('/').next().unwrap_or_default();
    let reads = READ_METHODS.contains(&method)
        || READ_VERBS.iter().any(|verb| {
            method
                .strip_prefix(verb)
                .is_some_and(|rest| rest.is_empty() || rest.starts_with(char::is_uppercase))
        });
    if reads { Access::Read } else { Access::Write }
}

/// Why `identity` may not make the write `call` (named for the message),
/// or `None` when it may.
pub fn write_refusal(identity: &Identity, call: &str) -> Option<String> {
    identity.is_read_only().then(|| {
        format!(
            "You are not authorized to {call}: user {:?} has only the {} role in project {:?}, \
             which may read but not change anything; this needs the {} or {} role",
            identity.user_id,
            ember_runtime::identity::READER_ROLE,
            identity.project_id,
            ember_runtime::identity::MEMBER_ROLE,
            ember_runtime::identity::ADMIN_ROLE,
        )
    })
}

/// The caller the role check authenticated, kept for the handler so the
/// token is verified once per request.
#[derive(Debug, Clone)]
pub struct CheckedIdentity(pub Identity);

/// The REST side of the rule: a route layer (it runs after routing, so it
/// knows the route's pattern). A write by a reader is answered 403 before
/// its handler runs; a request without a valid token goes on to its
/// handler, which answers 401 as it always has.
pub async fn enforce_rest(
    State(state): State<GatewayState>,
    mut request: Request,
    next: Next,
) -> Response {
    let route = request
        .extensions()
        .get::<MatchedPath>()
        .map(|matched| matched.as_str().to_owned())
        .unwrap_or_default();
    if rest_access(request.method(), &route) != Access::Write {
        return next.run(request).await;
    }
    if let Ok(identity) = state.authenticator.authenticate(request.headers()).await {
        let call = format!("{} {}", request.method(), request.uri().path());
        if let Some(refusal) = write_refusal(&identity, &call) {
            tracing::info!(
                user_id = %identity.user_id,
                project_id = %identity.project_id,
                %route,
                "a reader's write refused"
            );
            return RestError::new(ErrorKind::Forbidden, refusal).into_response();
        }
        if let Some(value) = request
            .headers()
            .get(ember_runtime::call_context::BREAK_GLASS_HEADER)
            && let Some((kind, refusal)) =
                ember_runtime::call_context::break_glass_refusal(&identity, value.as_bytes())
        {
            return RestError::new(kind, refusal).into_response();
        }
        request.extensions_mut().insert(CheckedIdentity(identity));
    }
    next.run(request).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gets_read_and_other_methods_write() {
        let route = "/orchestration/v1/{project_id}/software_configs";
        assert_eq!(rest_access(&Method::GET, route), Access::Read);
        assert_eq!(rest_access(&Method::HEAD, route), Access::Read);
        for method in [Method::POST, Method::PUT, Method::PATCH, Method::DELETE] {
            assert_eq!(rest_access(&method, route), Access::Write, "{method}");
        }
        // A route nobody listed is a write: the safe default.
        assert_eq!(
            rest_access(&Method::POST, "/some/route/added/tomorrow"),
            Access::Write
        );
    }

    #[test]
    fn calls_that_change_nothing_are_reads_whatever_their_method() {
        for (method, route) in READ_ONLY_WRITES {
            let method = Method::from_bytes(method.as_bytes()).expect("a method");
            assert_eq!(
                rest_access(&method, route),
                Access::Read,
                "{method} {route}"
            );
        }
        assert_eq!(
            rest_access(
                &Method::POST,
                "/orchestration/v1/signals/{stack_id}/{handle_id}"
            ),
            Access::CredentialInUrl
        );
    }

    #[test]
    fn rpcs_named_like_reads_read_and_the_rest_write() {
        for read in [
            "/ember.engine.v1.StackService/GetStack",
            "/ember.engine.v1.StackService/ListStacks",
            "/ember.engine.v1.StackService/IdentifyStack",
            "/ember.engine.v1.StackService/PreviewStack",
            "/ember.engine.v1.StackService/ValidateTemplate",
            "/ember.engine.v1.StackService/CheckOperation",
            "/ember.engine.v1.IdentityService/WhoAmI",
        ] {
            assert_eq!(grpc_access(read), Access::Read, "{read}");
        }
        for write in [
            "/ember.engine.v1.SoftwareConfigService/CreateSoftwareConfig",
            "/ember.engine.v1.SoftwareDeploymentService/UpdateSoftwareDeployment",
            "/ember.engine.v1.ResourceService/Signal",
            "/ember.engine.v1.StackService/PreviewStackUpdate",
            "/ember.engine.v1.NodeService/PreviewAdoptNode",
            "/ember.engine.v1.ClusterService/Check",
            "/ember.engine.v1.InstanceService/LockInstance",
            // A verb glued to a longer word is not that verb.
            "/ember.engine.v1.SomeService/Listen",
            "/ember.engine.v1.SomeService/Getaway",
        ] {
            assert_eq!(grpc_access(write), Access::Write, "{write}");
        }
    }

    #[test]
    fn only_a_reader_without_member_or_admin_is_refused() {
        let roles = |roles: &[&str]| {
            Identity::new(
                "rita",
                "demo",
                roles.iter().map(|role| (*role).to_owned()).collect(),
            )
        };
        let refusal = write_refusal(&roles(&["reader"]), "POST /x").expect("refused");
        assert!(refusal.contains("\"rita\"") && refusal.contains("reader"));
        assert!(refusal.contains("member or admin role"), "{refusal}");
        assert!(refusal.starts_with("You are not authorized to POST /x"));
        for allowed in [
            &["reader", "member"][..],
            &["admin"],
            &["member"],
            &["reader", "admin"],
            &["_member_"],
        ] {
            assert!(
                write_refusal(&roles(allowed), "POST /x").is_none(),
                "{allowed:?}"
            );
        }
    }
}
