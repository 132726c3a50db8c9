//! The HTTP client of webhook deliveries ([`ember_runtime::https`]): one
//! POST per attempt, no redirects (a signed message goes where it was
//! configured to, or fails), and only to addresses the egress rules admit,
//! vetted after resolution at every connection ([`ember_runtime::egress`]):
//! a tenant's URL never reaches Ember's own network.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use ember_runtime::egress::EgressRules;
use ember_runtime::https::{HttpsClient, SendFailure};
use http_body_util::Full;

#[derive(Clone)]
pub struct WebhookClient {
    client: HttpsClient,
}

impl WebhookClient {
    /// A client trusting the system's roots and those in `ca_file` (a PEM
    /// bundle; empty = none), calling only targets `rules` admit.
    pub fn new(
        ca_file: &str,
        timeout: Duration,
        rules: EgressRules,
    ) -> Result<WebhookClient, String> {
        Ok(WebhookClient {
            client: HttpsClient::with_egress_rules(
                ca_file,
                "lifecycle_hook.webhook_ca_file",
                timeout,
                Arc::new(rules),
            )?,
        })
    }

    /// POSTs `body` as JSON with `headers`; the response status, or why
    /// there is none (refused by the rules, connection, TLS, timeout).
    pub async fn post(
        &self,
        url: &str,
        headers: &[(&str, &str)],
        body: String,
    ) -> Result<http::StatusCode, SendFailure> {
        let mut request =
            http::Request::post(url).header(http::header::CONTENT_TYPE, "application/json");
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        let request = request
            .body(Full::new(Bytes::from(body)))
            .map_err(|error| SendFailure::Failed(format!("invalid request: {error}")))?;
        self.client.try_send_for_status(request).await
    }
}
