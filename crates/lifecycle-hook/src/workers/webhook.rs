//! The HTTP client of webhook deliveries: `http://` and `https://` (rustls
//! on ring, trusting the system's CA certificates plus those of
//! `lifecycle_hook.webhook_ca_file`), one POST per attempt, no redirects (a
//! signed message goes where it was configured to, or fails).
//!
//! Built on hyper directly rather than reqwest, so TLS stays a concern of
//! this client alone (reqwest elsewhere in Ember is built without TLS).

use std::sync::Arc;
use std::time::Duration;

use http_body_util::Full;
use hyper::body::Bytes;
use hyper_rustls::{HttpsConnector, HttpsConnectorBuilder};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use rustls::RootCertStore;
use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;

#[derive(Clone)]
pub struct WebhookClient {
    client: Client<HttpsConnector<HttpConnector>, Full<Bytes>>,
    timeout: Duration,
}

impl WebhookClient {
    /// A client trusting the system's roots and those in `ca_file` (a PEM
    /// bundle; empty = none).
    pub fn new(ca_file: &str, timeout: Duration) -> Result<WebhookClient, String> {
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
                .map_err(|error| {
                    format!(
                        "lifecycle_hook.webhook_ca_file {ca_file:?} is not a PEM bundle: {error}"
                    )
                })?;
            if certificates.is_empty() {
                return Err(format!(
                    "lifecycle_hook.webhook_ca_file {ca_file:?} holds no certificate"
                ));
            }
            for certificate in certificates {
                roots.add(certificate).map_err(|error| {
                    format!("lifecycle_hook.webhook_ca_file {ca_file:?}: {error}")
                })?;
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
            .wrap_connector(http);
        Ok(WebhookClient {
            client: Client::builder(TokioExecutor::new()).build(connector),
            timeout,
        })
    }

    /// POSTs `body` as JSON with `headers`; the response status, or why
    /// there is none (connection, TLS, timeout).
    pub async fn post(
        &self,
        url: &str,
        headers: &[(&str, &str)],
        body: String,
    ) -> Result<http::StatusCode, String> {
        let mut request =
            http::Request::post(url).header(http::header::CONTENT_TYPE, "application/json");
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        let request = request
            .body(Full::new(Bytes::from(body)))
            .map_err(|error| format!("invalid request: {error}"))?;
        match tokio::time::timeout(self.timeout, self.client.request(request)).await {
            Ok(Ok(response)) => Ok(response.status()),
            Ok(Err(error)) => Err(ember_runtime::error::with_causes(
                error.to_string(),
                std::error::Error::source(&error),
            )),
            Err(_) => Err(format!("no answer within {} s", self.timeout.as_secs())),
        }
    }
}
