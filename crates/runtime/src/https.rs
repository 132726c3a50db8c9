//! One HTTP client for the calls Ember makes out (webhook deliveries,
//! Keystone token validation): `http://` and `https://` (rustls on ring,
//! trusting the system's CA certificates plus those of a configured PEM
//! bundle), a timeout per request, no redirects (a signed message or a
//! token goes where it was configured to, or fails).
//!
//! Built on hyper directly rather than reqwest, so TLS stays a concern of
//! this client alone (reqwest elsewhere in Ember is built without TLS).

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_rustls::{HttpsConnector, HttpsConnectorBuilder};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use rustls::RootCertStore;
use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;

use crate::egress::connector::{VettingConnector, refusal_in};
use crate::egress::{EgressRefusal, EgressRules};

/// Why a request got no answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SendFailure {
    /// The egress rules refused the target (never worth retrying as is).
    Refused(EgressRefusal),
    /// Connection, TLS or timeout.
    Failed(String),
}

impl std::fmt::Display for SendFailure {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SendFailure::Refused(refusal) => refusal.fmt(formatter),
            SendFailure::Failed(reason) => formatter.write_str(reason),
        }
    }
}

/// The largest answer read; a longer one is an error.
pub const MAX_ANSWER_BYTES: usize = 1024 * 1024;

#[derive(Clone)]
pub struct HttpsClient {
    client: Client<HttpsConnector<VettingConnector>, Full<Bytes>>,
    timeout: Duration,
    answer_limit: usize,
}

impl std::fmt::Debug for HttpsClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpsClient")
            .field("timeout", &self.timeout)
            .finish()
    }
}

/// An answer: its status, headers and whole body.
#[derive(Debug)]
pub struct Answer {
    pub status: http::StatusCode,
    pub headers: http::HeaderMap,
    pub body: Bytes,
}

impl HttpsClient {
    /// A client trusting the system's roots and those in `ca_file` (a PEM
    /// bundle; empty = none). `ca_key` names the setting in errors.
    pub fn new(ca_file: &str, ca_key: &str, timeout: Duration) -> Result<HttpsClient, String> {
        HttpsClient::build(ca_file, ca_key, timeout, None)
    }

    /// A client for tenant-supplied URLs: it connects only to addresses
    /// `rules` admit, vetted after resolution ([`crate::egress`]).
    pub fn with_egress_rules(
        ca_file: &str,
        ca_key: &str,
        timeout: Duration,
        rules: Arc<EgressRules>,
    ) -> Result<HttpsClient, String> {
        HttpsClient::build(ca_file, ca_key, timeout, Some(rules))
    }

    fn build(
        ca_file: &str,
        ca_key: &str,
        timeout: Duration,
        rules: Option<Arc<EgressRules>>,
    ) -> Result<HttpsClient, String> {
        let mut roots = RootCertStore::empty();
        // Missing or unreadable system roots only make https:// targets
        // fail to verify; http:// and a configured CA still work.
        let native = rustls_native_certs::load_native_certs();
        for error in &native.errors {
            tracing::warn!(%error, "cannot read some system CA certificates");
        }
        roots.add_parsable_certificates(native.certs);
        if !ca_file.is_empty() {
            let certificates = CertificateDer::pem_file_iter(ca_file)
                .and_then(|certificates| certificates.collect::<Result<Vec<_>, _>>())
                .map_err(|error| format!("{ca_key} {ca_file:?} is not a PEM bundle: {error}"))?;
            if certificates.is_empty() {
                return Err(format!("{ca_key} {ca_file:?} holds no certificate"));
            }
            for certificate in certificates {
                roots
                    .add(certificate)
                    .map_err(|error| format!("{ca_key} {ca_file:?}: {error}"))?;
            }
        }
        let tls = rustls::ClientConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .map_err(|error| format!("TLS configuration: {error}"))?
        .with_root_certificates(roots)
        .with_no_client_auth();
        let mut http = HttpConnector::new();
        http.enforce_http(false);
        http.set_nodelay(true);
        http.set_connect_timeout(Some(timeout));
        let connector = HttpsConnectorBuilder::new()
            .with_tls_config(tls)
            .https_or_http()
            .enable_http1()
            .wrap_connector(VettingConnector::new(http, rules));
        Ok(HttpsClient {
            client: Client::builder(TokioExecutor::new()).build(connector),
            timeout,
            answer_limit: MAX_ANSWER_BYTES,
        })
    }

    /// The same client reading answers of up to `bytes` (default
    /// [`MAX_ANSWER_BYTES`]): a cloud's listings can be larger than a
    /// webhook's answer.
    pub fn with_answer_limit(mut self, bytes: usize) -> HttpsClient {
        self.answer_limit = bytes;
        self
    }

    /// Sends `request` and reads the whole answer, or says why there is
    /// none (connection, TLS, timeout).
    pub async fn send(&self, request: http::Request<Full<Bytes>>) -> Result<Answer, String> {
        let exchange = async {
            let response = self.client.request(request).await.map_err(|error| {
                crate::error::with_causes(error.to_string(), std::error::Error::source(&error))
            })?;
            let (parts, body) = response.into_parts();
            let body = http_body_util::Limited::new(body, self.answer_limit)
                .collect()
                .await
                .map_err(|error| format!("reading the answer: {error}"))?
                .to_bytes();
            Ok(Answer {
                status: parts.status,
                headers: parts.headers,
                body,
            })
        };
        match tokio::time::timeout(self.timeout, exchange).await {
            Ok(result) => result,
            Err(_) => Err(format!("no answer within {} s", self.timeout.as_secs())),
        }
    }

    /// Sends `request` and returns only the answer's status (the body is
    /// not read).
    pub async fn send_for_status(
        &self,
        request: http::Request<Full<Bytes>>,
    ) -> Result<http::StatusCode, String> {
        self.try_send_for_status(request)
            .await
            .map_err(|failure| failure.to_string())
    }

    /// [`HttpsClient::send_for_status`], telling a target the egress rules
    /// refused apart from one that did not answer.
    pub async fn try_send_for_status(
        &self,
        request: http::Request<Full<Bytes>>,
    ) -> Result<http::StatusCode, SendFailure> {
        match tokio::time::timeout(self.timeout, self.client.request(request)).await {
            Ok(Ok(response)) => Ok(response.status()),
            Ok(Err(error)) => {
                let source = std::error::Error::source(&error);
                if let Some(refusal) = refusal_in(source) {
                    return Err(SendFailure::Refused(refusal.clone()));
                }
                Err(SendFailure::Failed(crate::error::with_causes(
                    error.to_string(),
                    source,
                )))
            }
            Err(_) => Err(SendFailure::Failed(format!(
                "no answer within {} s",
                self.timeout.as_secs()
            ))),
        }
    }
}
