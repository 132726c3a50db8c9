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

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use ember_runtime::egress::{AddressKind, EgressRefusal, WebhookTargetsSection};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    use super::*;

    /// A real HTTP server on 127.0.0.1 answering 200 to anything, counting
    /// the connections it accepts.
    async fn target() -> (u16, Arc<AtomicUsize>) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let port = listener.local_addr().expect("address").port();
        let connections = Arc::new(AtomicUsize::new(0));
        let counted = connections.clone();
        tokio::spawn(async move {
            while let Ok((mut stream, _)) = listener.accept().await {
                counted.fetch_add(1, Ordering::SeqCst);
                let mut buffer = [0_u8; 4096];
                let _ = stream.read(&mut buffer).await;
                let _ = stream
                    .write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\nconnection: close\r\n\r\n")
                    .await;
            }
        });
        (port, connections)
    }

    fn client(allow: Vec<String>) -> WebhookClient {
        let rules = WebhookTargetsSection {
            allow_private_addresses: false,
            allow,
        }
        .rules();
        WebhookClient::new("", Duration::from_secs(5), rules).expect("client")
    }

    /// What a delivery meets when a URL accepted earlier now leads inside
    /// (DNS changed): refused at connection time, nothing reaches the
    /// address, and the failure says it was refused, not unanswered.
    #[tokio::test]
    async fn a_delivery_to_an_internal_address_is_refused_before_connecting() {
        let (port, connections) = target().await;
        let strict = client(Vec::new());
        for url in [
            format!("http://127.0.0.1:{port}/hook"),
            format!("http://localhost:{port}/hook"),
        ] {
            let failure = strict
                .post(&url, &[], "{}".to_owned())
                .await
                .expect_err(&url);
            assert!(
                matches!(
                    &failure,
                    SendFailure::Refused(EgressRefusal::Internal {
                        kind: AddressKind::Loopback,
                        ..
                    })
                ),
                "{url}: {failure:?}"
            );
        }
        assert_eq!(connections.load(Ordering::SeqCst), 0, "nothing connected");

        let allowed = client(vec![format!("127.0.0.1:{port}")]);
        let status = allowed
            .post(
                &format!("http://127.0.0.1:{port}/hook"),
                &[],
                "{}".to_owned(),
            )
            .await
            .expect("delivered");
        assert_eq!(status, http::StatusCode::OK);
        assert_eq!(connections.load(Ordering::SeqCst), 1);
    }
}
