//! The HTTP client of webhook deliveries ([`ember_runtime::https`]): one
//! POST per attempt, no redirects (a signed message goes where it was
//! configured to, or fails).

use std::time::Duration;

use bytes::Bytes;
use ember_runtime::https::HttpsClient;
use http_body_util::Full;

#[derive(Clone)]
pub struct WebhookClient {
    client: HttpsClient,
}

impl WebhookClient {
    /// A client trusting the system's roots and those in `ca_file` (a PEM
    /// bundle; empty = none).
    pub fn new(ca_file: &str, timeout: Duration) -> Result<WebhookClient, String> {
        Ok(WebhookClient {
            client: HttpsClient::new(ca_file, "lifecycle_hook.webhook_ca_file", timeout)?,
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
        self.client.send_for_status(request).await
    }
}
