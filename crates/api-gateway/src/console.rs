//! The web console at `/console/`: static files — HTML, ES modules, CSS
//! and the vendored graph layout (`console/vendor`) — embedded in the
//! binary at build time (`build.rs`). The pages call the same public API
//! as any client, with the signed-in user's token, so they see and do
//! exactly what that user may; nothing here reads a store or skips a check.
//!
//! `gateway.console_dir` serves the files from a directory instead, read
//! at each request, for working on the console without rebuilding.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use axum::Router;
use axum::extract::Path as UrlPath;
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::get;
use bytes::Bytes;
use http::{HeaderMap, HeaderValue, StatusCode, header};
use sha2::{Digest, Sha256};

/// The files built into the binary, `(path under console/, bytes)`.
const EMBEDDED: &[(&str, &[u8])] = include!(concat!(env!("OUT_DIR"), "/console_assets.rs"));

/// What the pages may load and call: only this origin, no inline script
/// or style, no framing.
const CONTENT_SECURITY_POLICY: &str = "default-src 'self'; script-src 'self'; \
    style-src 'self'; img-src 'self' data:; connect-src 'self'; font-src 'self'; \
    object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

/// Where the console's files come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConsoleSource {
    /// No console: `/console` is 404 like any unknown path.
    Off,
    /// The files built into the binary.
    Embedded,
    /// The files of this directory, read at each request.
    Directory(PathBuf),
}

/// The console's files, ready to serve.
pub struct Console {
    files: Files,
}

enum Files {
    Embedded(HashMap<&'static str, Asset>),
    Directory(PathBuf),
}

#[derive(Clone)]
struct Asset {
    bytes: Bytes,
    etag: HeaderValue,
}

impl Console {
    /// The console `source` names, or `None` when it is off.
    pub fn new(source: &ConsoleSource) -> Option<Arc<Console>> {
        let files = match source {
            ConsoleSource::Off => return None,
            ConsoleSource::Embedded => Files::Embedded(
                EMBEDDED
                    .iter()
                    .map(|&(path, bytes)| {
                        let asset = Asset {
                            bytes: Bytes::from_static(bytes),
                            etag: etag_of(bytes),
                        };
                        (path, asset)
                    })
                    .collect(),
            ),
            ConsoleSource::Directory(dir) => Files::Directory(dir.clone()),
        };
        Some(Arc::new(Console { files }))
    }

    /// The routes under `/console`.
    pub fn routes<S: Clone + Send + Sync + 'static>(self: Arc<Self>) -> Router<S> {
        let index = self.clone();
        let file = self;
        Router::new()
            .route(
                "/console",
                get(|| async { Redirect::permanent("/console/") }),
            )
            .route(
                "/console/",
                get(move |headers: HeaderMap| {
                    let console = index.clone();
                    async move { console.serve("index.html", &headers).await }
                }),
            )
            .route(
                "/console/{*path}",
                get(move |UrlPath(path): UrlPath<String>, headers: HeaderMap| {
                    let console = file.clone();
                    async move { console.serve(&path, &headers).await }
                }),
            )
    }

    async fn serve(&self, path: &str, headers: &HeaderMap) -> Response {
        let Some(path) = clean(path) else {
            return not_found();
        };
        let content_type = content_type_of(&path);
        let (asset, cache) = match &self.files {
            Files::Embedded(assets) => match assets.get(path.as_str()) {
                Some(asset) => (asset.clone(), "no-cache"),
                None => return not_found(),
            },
            Files::Directory(dir) => match read_from(dir, &path).await {
                Some(asset) => (asset, "no-store"),
                None => return not_found(),
            },
        };
        let fresh = headers
            .get(header::IF_NONE_MATCH)
            .is_some_and(|tags| tags.as_bytes() == asset.etag.as_bytes());
        let mut response = if fresh {
            StatusCode::NOT_MODIFIED.into_response()
        } else {
            (
                [(header::CONTENT_TYPE, HeaderValue::from_static(content_type))],
                asset.bytes,
            )
                .into_response()
        };
        let headers = response.headers_mut();
        headers.insert(header::ETAG, asset.etag);
        headers.insert(header::CACHE_CONTROL, HeaderValue::from_static(cache));
        secure(headers);
        response
    }
}

/// The file at `path` under `dir`, if there is one.
async fn read_from(dir: &Path, path: &str) -> Option<Asset> {
    let bytes = tokio::fs::read(dir.join(path)).await.ok()?;
    let etag = etag_of(&bytes);
    Some(Asset {
        bytes: Bytes::from(bytes),
        etag,
    })
}

/// A request path as a file path under the console's root: empty means
/// the index; `..`, `.`, hidden names, backslashes and empty segments are
/// refused (`None`).
fn clean(path: &str) -> Option<String> {
    if path.is_empty() {
        return Some("index.html".to_owned());
    }
    let path = path.strip_suffix('/').unwrap_or(path);
    let fine = path
        .split('/')
        .all(|segment| !segment.is_empty() && !segment.starts_with('.') && !segment.contains('\\'));
    fine.then(|| path.to_owned())
}

fn content_type_of(path: &str) -> &'static str {
    match path.rsplit_once('.').map(|(_, extension)| extension) {
        Some("html") => "text/html; charset=utf-8",
        Some("js" | "mjs") => "text/javascript; charset=utf-8",
        Some("css") => "text/css; charset=utf-8",
        Some("svg") => "image/svg+xml",
        Some("png") => "image/png",
        Some("ico") => "image/x-icon",
        Some("json") => "application/json",
        Some("woff2") => "font/woff2",
        _ => "text/plain; charset=utf-8",
    }
}

/// A strong validator: the first 16 bytes of the content's SHA-256.
fn etag_of(bytes: &[u8]) -> HeaderValue {
    let digest = Sha256::digest(bytes);
    let hex: String = digest[..16]
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect();
    HeaderValue::from_str(&format!("\"{hex}\"")).expect("hex is a valid header value")
}

/// The headers every console answer carries.
fn secure(headers: &mut HeaderMap) {
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CONTENT_SECURITY_POLICY),
    );
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    headers.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
}

fn not_found() -> Response {
    let mut response = (StatusCode::NOT_FOUND, "no such console file").into_response();
    secure(response.headers_mut());
    response
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::body::Body;
    use http::Request;
    use tower::ServiceExt as _;

    #[test]
    fn paths_outside_the_console_are_refused() {
        assert_eq!(clean("").as_deref(), Some("index.html"));
        assert_eq!(clean("app.js").as_deref(), Some("app.js"));
        assert_eq!(clean("pages/stack.js").as_deref(), Some("pages/stack.js"));
        for bad in [
            "../Cargo.toml",
            "a/../../b",
            "./app.js",
            ".env",
            "a//b",
            "a\\..\\b",
        ] {
            assert_eq!(clean(bad), None, "{bad} must be refused");
        }
    }

    #[test]
    fn the_embedded_console_has_its_index_and_layout_library() {
        let names: Vec<&str> = EMBEDDED.iter().map(|(path, _)| *path).collect();
        for wanted in ["index.html", "app.js", "style.css", "vendor/dagre.esm.js"] {
            assert!(
                names.contains(&wanted),
                "{wanted} is not embedded: {names:?}"
            );
        }
    }

    async fn get(router: &Router, path: &str, etag: Option<&HeaderValue>) -> Response {
        let mut request = Request::get(path);
        if let Some(etag) = etag {
            request = request.header(header::IF_NONE_MATCH, etag);
        }
        router
            .clone()
            .oneshot(request.body(Body::empty()).expect("a request"))
            .await
            .expect("an answer")
    }

    async fn body_of(response: Response) -> Vec<u8> {
        axum::body::to_bytes(response.into_body(), usize::MAX)
            .await
            .expect("a body")
            .to_vec()
    }

    #[tokio::test]
    async fn the_built_in_console_is_served_with_its_policy_and_validators() {
        let router: Router = Console::new(&ConsoleSource::Embedded)
            .expect("a console")
            .routes();

        let bare = get(&router, "/console", None).await;
        assert_eq!(bare.status(), StatusCode::PERMANENT_REDIRECT);
        assert_eq!(bare.headers()[header::LOCATION], "/console/");

        let index = get(&router, "/console/", None).await;
        assert_eq!(index.status(), StatusCode::OK);
        assert_eq!(
            index.headers()[header::CONTENT_TYPE],
            "text/html; charset=utf-8"
        );
        let policy = index.headers()[header::CONTENT_SECURITY_POLICY]
            .to_str()
            .expect("ASCII");
        assert!(policy.contains("script-src 'self'") && policy.contains("frame-ancestors 'none'"));
        assert_eq!(index.headers()[header::X_CONTENT_TYPE_OPTIONS], "nosniff");
        assert_eq!(index.headers()[header::CACHE_CONTROL], "no-cache");
        let etag = index.headers()[header::ETAG].clone();
        let html = body_of(index).await;
        let built_in = EMBEDDED
            .iter()
            .find(|(path, _)| *path == "index.html")
            .expect("an index");
        assert_eq!(html, built_in.1);

        let again = get(&router, "/console/", Some(&etag)).await;
        assert_eq!(again.status(), StatusCode::NOT_MODIFIED);
        assert!(body_of(again).await.is_empty());

        let script = get(&router, "/console/vendor/dagre.esm.js", None).await;
        assert_eq!(script.status(), StatusCode::OK);
        assert_eq!(
            script.headers()[header::CONTENT_TYPE],
            "text/javascript; charset=utf-8"
        );
        assert_ne!(script.headers()[header::ETAG], etag);

        for missing in [
            "/console/nothing.js",
            "/console/%2e%2e/Cargo.toml",
            "/console/.hidden",
        ] {
            let answer = get(&router, missing, None).await;
            assert_eq!(answer.status(), StatusCode::NOT_FOUND, "{missing}");
            assert!(
                answer
                    .headers()
                    .contains_key(header::CONTENT_SECURITY_POLICY)
            );
        }
    }

    #[tokio::test]
    async fn a_console_directory_is_read_at_each_request_and_kept_inside() {
        let parent = tempfile_dir();
        let dir = parent.join("console");
        std::fs::create_dir_all(&dir).expect("a directory");
        std::fs::write(parent.join("secret.txt"), "not for the web").expect("written");
        std::fs::write(dir.join("index.html"), "first").expect("written");
        let router: Router = Console::new(&ConsoleSource::Directory(dir.clone()))
            .expect("a console")
            .routes();

        let first = get(&router, "/console/", None).await;
        assert_eq!(first.headers()[header::CACHE_CONTROL], "no-store");
        assert_eq!(body_of(first).await, b"first");
        std::fs::write(dir.join("index.html"), "second").expect("written");
        assert_eq!(
            body_of(get(&router, "/console/", None).await).await,
            b"second"
        );
        let outside = get(&router, "/console/%2e%2e/secret.txt", None).await;
        assert_eq!(outside.status(), StatusCode::NOT_FOUND);
        std::fs::remove_dir_all(&parent).expect("cleaned up");
    }

    #[test]
    fn a_console_turned_off_has_no_routes() {
        assert!(Console::new(&ConsoleSource::Off).is_none());
    }

    /// A fresh directory under the system's temporary directory.
    fn tempfile_dir() -> PathBuf {
        let dir = std::env::temp_dir().join(format!("ember-console-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&dir).expect("a temporary directory");
        dir
    }
}
