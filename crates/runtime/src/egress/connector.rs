//! The connection side of the egress rules: a connector that resolves the
//! URL's host itself, vets every address ([`super::EgressRules::resolve`])
//! and hands the plain TCP connector only the vetted addresses, as
//! literals — so what is connected to is exactly what was checked, and a
//! DNS answer that changes between the check and the connection cannot
//! lead anywhere else. TLS, wrapped around this, still verifies the name
//! in the URL.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use http::Uri;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;
use tower::Service;

use super::{EgressRefusal, EgressRules};

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// [`HttpConnector`] behind the egress rules; without rules (Ember's calls
/// to URLs its operator configured) it connects as the plain one does.
#[derive(Clone)]
pub struct VettingConnector {
    inner: HttpConnector,
    rules: Option<Arc<EgressRules>>,
}

impl VettingConnector {
    pub fn new(inner: HttpConnector, rules: Option<Arc<EgressRules>>) -> VettingConnector {
        VettingConnector { inner, rules }
    }
}

impl Service<Uri> for VettingConnector {
    type Response = TokioIo<TcpStream>;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, BoxError>> + Send>>;

    fn poll_ready(&mut self, context: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.inner.poll_ready(context).map_err(Into::into)
    }

    fn call(&mut self, uri: Uri) -> Self::Future {
        let mut inner = self.inner.clone();
        let Some(rules) = self.rules.clone() else {
            return Box::pin(async move { inner.call(uri).await.map_err(Into::into) });
        };
        Box::pin(async move {
            let url = uri.to_string();
            let (host, port) = super::host_and_port(&url)?;
            let addresses = rules.resolve(&host, port).await?;
            let mut last_error: Option<BoxError> = None;
            for address in addresses {
                let literal: Uri = format!("http://{address}")
                    .parse()
                    .map_err(|error| -> BoxError { Box::new(error) })?;
                match inner.call(literal).await {
                    Ok(stream) => return Ok(stream),
                    Err(error) => last_error = Some(Box::new(error)),
                }
            }
            Err(last_error.unwrap_or_else(|| {
                Box::new(EgressRefusal::Unresolved {
                    host,
                    reason: "no address".to_owned(),
                })
            }))
        })
    }
}

/// The egress refusal somewhere in `error`'s chain of causes, if one is
/// why a call failed.
pub fn refusal_in<'a>(
    mut error: Option<&'a (dyn std::error::Error + 'static)>,
) -> Option<&'a EgressRefusal> {
    while let Some(current) = error {
        if let Some(refusal) = current.downcast_ref::<EgressRefusal>() {
            return Some(refusal);
        }
        error = current.source();
    }
    None
}
