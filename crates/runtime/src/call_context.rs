//! What travels with one call besides its caller: the request id the
//! gateway gave it (or its client sent), and an admin's break-glass reason.
//! The gateway forwards both as headers; each internal service's
//! [`CallContextLayer`] makes them the call's [`CallContext`] for as long
//! as its handler runs, so the audit records an operation writes name the
//! request they came from without every method taking them as arguments.
//!
//! Who may break glass is decided at the gateway's door (admins only, a
//! reason required) and again where a lock is broken (the caller must be an
//! admin): a context is only ever read behind the internal credential.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use crate::identity::{Identity, REQUEST_ID_HEADER};

/// The header by which an admin runs one operation through a lock, with
/// the reason why.
pub const BREAK_GLASS_HEADER: &str = "x-ember-break-glass";

/// The longest break-glass reason (as a lock's reason).
pub const MAX_BREAK_GLASS_REASON: usize = 255;

/// The longest request id kept (a client's own may be anything).
const MAX_REQUEST_ID: usize = 128;

/// What one call carries besides its caller.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CallContext {
    /// The gateway's `x-request-id` (empty when the call did not come
    /// through it).
    pub request_id: String,
    /// An admin's reason to run this operation through a lock or a
    /// failing lifecycle plug-in.
    pub break_glass: Option<String>,
    /// Who asked for the break-glass (read from the call's identity
    /// headers only when it carries one): the work an operation runs after
    /// its call returned — a stack's lifecycle plug-ins — checks and
    /// records who broke glass from here.
    pub break_glass_caller: Option<Identity>,
}

tokio::task_local! {
    static CURRENT: CallContext;
}

impl CallContext {
    /// The context of the call being handled (empty outside a call: the
    /// engine's own work).
    pub fn current() -> CallContext {
        CURRENT.try_with(Clone::clone).unwrap_or_default()
    }

    /// Runs `work` as part of a call with this context.
    pub async fn scope<F: Future>(self, work: F) -> F::Output {
        CURRENT.scope(self, work).await
    }

    /// The context the headers of a call carry.
    pub fn from_headers(headers: &http::HeaderMap) -> CallContext {
        let text = |name: &str| {
            headers
                .get(name)
                .and_then(|value| value.to_str().ok())
                .map(str::trim)
        };
        let break_glass = text(BREAK_GLASS_HEADER)
            .filter(|reason| !reason.is_empty())
            .map(str::to_owned);
        CallContext {
            request_id: text(REQUEST_ID_HEADER)
                .map(|id| id.chars().take(MAX_REQUEST_ID).collect())
                .unwrap_or_default(),
            break_glass_caller: break_glass
                .as_ref()
                .and_then(|_| Identity::from_headers(headers).ok()),
            break_glass,
        }
    }

    /// The reason of an admin's break-glass, with the admin: `None` when
    /// the call carries none, or its caller is not an admin.
    pub fn admin_break_glass(&self) -> Option<(&Identity, &str)> {
        match (&self.break_glass_caller, &self.break_glass) {
            (Some(caller), Some(reason)) if caller.is_admin() => Some((caller, reason)),
            _ => None,
        }
    }
}

/// Why `caller` may not send the break-glass header with the value
/// `value` (its raw bytes), as a client error; `None` when they may.
/// Checked by the gateway before any write is forwarded.
pub fn break_glass_refusal(caller: &Identity, value: &[u8]) -> Option<(crate::ErrorKind, String)> {
    // What a header carries reliably, and what the internal call's
    // metadata can take on.
    let reason = match std::str::from_utf8(value) {
        Ok(reason) if reason.chars().all(|c| c == ' ' || c.is_ascii_graphic()) => reason.trim(),
        _ => {
            return Some((
                crate::ErrorKind::InvalidInput,
                "X-Ember-Break-Glass: the reason must be printable ASCII".to_owned(),
            ));
        }
    };
    if reason.is_empty() {
        return Some((
            crate::ErrorKind::InvalidInput,
            "X-Ember-Break-Glass needs a reason: say why the lock must be broken \
             (e.g. `X-Ember-Break-Glass: INC-1234 database failover`)"
                .to_owned(),
        ));
    }
    if reason.chars().count() > MAX_BREAK_GLASS_REASON {
        return Some((
            crate::ErrorKind::InvalidInput,
            format!(
                "X-Ember-Break-Glass: the reason must be at most {MAX_BREAK_GLASS_REASON} characters"
            ),
        ));
    }
    if !caller.is_admin() {
        return Some((
            crate::ErrorKind::Forbidden,
            format!(
                "only an admin can break glass: user {:?} of project {:?} has roles [{}]",
                caller.user_id,
                caller.project_id,
                caller.roles.join(", ")
            ),
        ));
    }
    None
}

/// Makes each call's headers its [`CallContext`] while it is handled.
#[derive(Debug, Clone, Copy, Default)]
pub struct CallContextLayer;

impl<S> tower::Layer<S> for CallContextLayer {
    type Service = WithCallContext<S>;

    fn layer(&self, inner: S) -> WithCallContext<S> {
        WithCallContext { inner }
    }
}

/// See [`CallContextLayer`].
#[derive(Debug, Clone)]
pub struct WithCallContext<S> {
    inner: S,
}

impl<S, B> tower::Service<http::Request<B>> for WithCallContext<S>
where
    S: tower::Service<http::Request<B>>,
    S::Future: Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<S::Response, S::Error>> + Send + 'static>>;

    fn poll_ready(&mut self, context: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(context)
    }

    fn call(&mut self, request: http::Request<B>) -> Self::Future {
        let context = CallContext::from_headers(request.headers());
        let response = self.inner.call(request);
        Box::pin(context.scope(response))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn admin() -> Identity {
        Identity::new("root", "ops", vec!["admin".into()])
    }

    #[test]
    fn a_break_glass_needs_an_admin_and_a_reason() {
        assert_eq!(break_glass_refusal(&admin(), b"INC-1 failover"), None);
        let (kind, message) = break_glass_refusal(&admin(), b"  ").expect("no reason");
        assert_eq!(kind, crate::ErrorKind::InvalidInput);
        assert!(message.contains("needs a reason"), "{message}");
        let member = Identity::new("alice", "demo", vec!["member".into()]);
        let (kind, message) = break_glass_refusal(&member, b"because").expect("a member");
        assert_eq!(kind, crate::ErrorKind::Forbidden);
        assert!(message.contains("only an admin"), "{message}");
        let long = "x".repeat(MAX_BREAK_GLASS_REASON + 1);
        assert!(break_glass_refusal(&admin(), long.as_bytes()).is_some());
        assert!(break_glass_refusal(&admin(), &[0xff, 0xfe]).is_some());
        assert!(break_glass_refusal(&admin(), "café".as_bytes()).is_some());
    }

    #[tokio::test]
    async fn the_context_is_the_calls_while_it_runs_and_empty_outside() {
        let mut headers = http::HeaderMap::new();
        headers.insert(REQUEST_ID_HEADER, "req-1".parse().expect("a header"));
        headers.insert(BREAK_GLASS_HEADER, " INC-7 ".parse().expect("a header"));
        let context = CallContext::from_headers(&headers);
        let seen = context
            .clone()
            .scope(async { CallContext::current() })
            .await;
        assert_eq!(seen.request_id, "req-1");
        assert_eq!(seen.break_glass.as_deref(), Some("INC-7"));
        assert_eq!(seen.admin_break_glass(), None, "no caller named");
        assert_eq!(CallContext::current(), CallContext::default());

        admin().write_headers(
            &crate::identity::InternalCredential::new("c".repeat(32).as_str()),
            &mut headers,
        );
        let context = CallContext::from_headers(&headers);
        let (caller, reason) = context.admin_break_glass().expect("an admin's");
        assert_eq!((caller.user_id.as_str(), reason), ("root", "INC-7"));
        headers.remove(BREAK_GLASS_HEADER);
        assert_eq!(
            CallContext::from_headers(&headers).break_glass_caller,
            None,
            "the caller is read only with a break-glass"
        );
    }
}
