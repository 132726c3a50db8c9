//! One authenticated session with a cloud, as a well-kept client keeps
//! one: a token asked for once and renewed before it expires (or when a
//! service says it no longer holds), service URLs from the token's
//! catalog, each call's request id sent and the service's logged, and a
//! call retried only where doing it twice cannot do twice what it does.
//!
//! A [`Cloud`] is what every session with one cloud shares — the HTTP
//! client, where Keystone is, which interface and region to use, and the
//! microversions each service was found to speak. A [`Session`] is one
//! set of credentials on it (Ember's service user, or a trust acting for
//! a user); it is cheap to clone and every clone shares its token.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use ember_runtime::https::HttpsClient;
use http::Method;
use http_body_util::Full;
use serde::de::DeserializeOwned;
use serde_json::Value;
use tracing::{debug, warn};

use crate::auth::{self, Credentials, Token};
use crate::catalog::Interface;
use crate::error::{ApiError, Error, Result, Service, message_of};
use crate::microversion::Microversion;

/// A token is renewed this long before Keystone says it expires (what
/// keystoneauth does).
pub const RENEW_BEFORE: Duration = Duration::from_secs(120);

/// How long a name's (or an id's) resolution to an object's id is trusted
/// before the service is asked again: a stack of many servers names the
/// same image, flavor and networks many times (Heat memoizes its finders
/// too, for an hour by default).
pub const LOOKUP_TTL: Duration = Duration::from_secs(60);

/// The most resolutions remembered (then forgotten all at once: cheap, and
/// the next calls remember what is used now).
const LOOKUPS_KEPT: usize = 10_000;

/// What a resolution is remembered by: (project, kind, name or id).
type LookupKey = (String, &'static str, String);

/// Remembered resolutions → (id, until), and the resolutions under way:
/// one per key at a time, so the servers of one stack starting together
/// ask the service once for their image, not once each.
#[derive(Default)]
struct Lookups {
    found: HashMap<LookupKey, (String, std::time::Instant)>,
    under_way: HashMap<LookupKey, Arc<tokio::sync::Mutex<()>>>,
}

impl Lookups {
    fn remembered(&self, key: &LookupKey, now: std::time::Instant) -> Option<String> {
        self.found
            .get(key)
            .filter(|(_, until)| *until > now)
            .map(|(id, _)| id.clone())
    }

    /// Forgets `key`'s turn once nobody else waits for it (the map and
    /// `turn` hold the only references).
    fn done_with(&mut self, key: &LookupKey, turn: &Arc<tokio::sync::Mutex<()>>) {
        if Arc::strong_count(turn) <= 2 {
            self.under_way.remove(key);
        }
    }
}

/// The largest answer read from a service (listings are paged well below).
pub const MAX_ANSWER_BYTES: usize = 16 * 1024 * 1024;

/// How many times an idempotent call is made when the service does not
/// answer or answers 502/503/504, and the pause before the first retry
/// (doubled each time).
pub const IDEMPOTENT_ATTEMPTS: u32 = 4;
const FIRST_RETRY_PAUSE: Duration = Duration::from_millis(250);

/// Where the cloud is and how Ember reaches its services.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CloudConfig {
    /// Keystone's URL, with or without `/v3`.
    pub auth_url: String,
    /// The region whose endpoints are used (`None`: the first offered).
    pub region: Option<String>,
    pub interface: Interface,
    /// Extra CA certificates (PEM) for https:// endpoints; empty = none.
    pub ca_file: String,
    /// The longest one request may take.
    pub timeout: Duration,
}

/// What every session with one cloud shares.
pub struct Cloud {
    http: HttpsClient,
    config: CloudConfig,
    /// The microversions each endpoint speaks, found once.
    versions: Mutex<HashMap<String, (Microversion, Microversion)>>,
    /// Names (and ids) resolved to ids lately, per project.
    lookups: Mutex<Lookups>,
}

impl std::fmt::Debug for Cloud {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cloud")
            .field("auth_url", &self.config.auth_url)
            .finish()
    }
}

impl Cloud {
    /// Fails only on a bad CA file.
    pub fn new(config: CloudConfig) -> std::result::Result<Arc<Cloud>, String> {
        let http = HttpsClient::new(&config.ca_file, "openstack.ca_file", config.timeout)?
            .with_answer_limit(MAX_ANSWER_BYTES);
        Ok(Arc::new(Cloud {
            http,
            config,
            versions: Mutex::default(),
            lookups: Mutex::default(),
        }))
    }

    pub fn config(&self) -> &CloudConfig {
        &self.config
    }

    fn lookups(&self) -> std::sync::MutexGuard<'_, Lookups> {
        match self.lookups.lock() {
            Ok(lookups) => lookups,
            Err(poisoned) => poisoned.into_inner(),
        }
    }

    /// A session with `credentials` (nothing is asked of Keystone until the
    /// first call).
    pub fn session(self: &Arc<Self>, credentials: Credentials) -> Session {
        Session {
            cloud: self.clone(),
            credentials: Arc::new(credentials),
            token: Arc::default(),
        }
    }

    /// Asks Keystone for a token with `credentials`.
    pub async fn authenticate(&self, credentials: &Credentials) -> Result<Token> {
        let url = auth::tokens_url(&self.config.auth_url);
        let request = http::Request::post(&url)
            .header(http::header::CONTENT_TYPE, "application/json")
            .header(http::header::ACCEPT, "application/json")
            .body(Full::new(Bytes::from(credentials.body().to_string())))
            .map_err(|error| Error::Authentication(format!("{url}: {error}")))?;
        let answer = self
            .http
            .send(request)
            .await
            .map_err(|message| Error::Unreachable {
                service: Service::Identity,
                message: format!("{url}: {message}"),
            })?;
        match answer.status.as_u16() {
            200 | 201 => {
                let value = answer
                    .headers
                    .get("x-subject-token")
                    .and_then(|value| value.to_str().ok())
                    .ok_or_else(|| Error::Decode {
                        service: Service::Identity,
                        message: "no X-Subject-Token header in the token answer".to_owned(),
                    })?;
                Token::from_answer(value.to_owned(), &answer.body).map_err(|message| {
                    Error::Decode {
                        service: Service::Identity,
                        message,
                    }
                })
            }
            401 | 403 | 404 => Err(Error::Authentication(message_of(
                answer.status.as_u16(),
                &answer.body,
            ))),
            status => Err(Error::Api(ApiError {
                service: Service::Identity,
                method: "POST".to_owned(),
                path: "/v3/auth/tokens".to_owned(),
                status,
                message: message_of(status, &answer.body),
                request_id: request_id_of(&answer.headers),
            })),
        }
    }
}

/// One set of credentials on a cloud.
#[derive(Clone)]
pub struct Session {
    cloud: Arc<Cloud>,
    credentials: Arc<Credentials>,
    token: Arc<tokio::sync::Mutex<Option<Arc<Token>>>>,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session")
            .field("scope", &self.credentials.scope)
            .finish()
    }
}

/// Whether a call may be made again when it got no verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Retry {
    /// Doing it twice does it once (reads, PUTs, DELETEs, and POSTs that
    /// name what they make).
    Idempotent,
    /// It could be done twice (a POST that makes something).
    Never,
}

/// One call to a service, below its endpoint.
#[derive(Debug, Clone)]
pub struct Call {
    pub service: Service,
    pub method: Method,
    /// Below the service's endpoint, with its leading `/`.
    pub path: String,
    pub query: Vec<(String, String)>,
    pub body: Option<Value>,
    /// `application/json` unless said otherwise (Glance's PATCH).
    pub content_type: &'static str,
    pub microversion: Option<Microversion>,
    pub retry: Retry,
    /// Headers of the call's own (`X-Subject-Token`).
    pub headers: Vec<(http::HeaderName, String)>,
}

impl Call {
    pub fn new(service: Service, method: Method, path: impl Into<String>) -> Call {
        let retry = if method == Method::POST || method == Method::PATCH {
            Retry::Never
        } else {
            Retry::Idempotent
        };
        Call {
            service,
            method,
            path: path.into(),
            query: Vec::new(),
            body: None,
            content_type: "application/json",
            microversion: None,
            retry,
            headers: Vec::new(),
        }
    }

    pub fn get(service: Service, path: impl Into<String>) -> Call {
        Call::new(service, Method::GET, path)
    }

    pub fn post(service: Service, path: impl Into<String>, body: Value) -> Call {
        Call::new(service, Method::POST, path).body(body)
    }

    pub fn put(service: Service, path: impl Into<String>, body: Value) -> Call {
        Call::new(service, Method::PUT, path).body(body)
    }

    pub fn delete(service: Service, path: impl Into<String>) -> Call {
        Call::new(service, Method::DELETE, path)
    }

    pub fn body(mut self, body: Value) -> Call {
        self.body = Some(body);
        self
    }

    pub fn query(mut self, name: &str, value: impl Into<String>) -> Call {
        self.query.push((name.to_owned(), value.into()));
        self
    }

    pub fn microversion(mut self, version: Microversion) -> Call {
        self.microversion = Some(version);
        self
    }

    /// Marks a POST that may be made again safely (an action whose second
    /// run finds the first done, a create that names its id).
    pub fn idempotent(mut self) -> Call {
        self.retry = Retry::Idempotent;
        self
    }

    pub fn header(mut self, name: http::HeaderName, value: impl Into<String>) -> Call {
        self.headers.push((name, value.into()));
        self
    }

    pub fn content_type(mut self, content_type: &'static str) -> Call {
        self.content_type = content_type;
        self
    }
}

/// A service's successful answer.
#[derive(Debug, Clone)]
pub struct Answer {
    pub status: u16,
    pub headers: http::HeaderMap,
    pub body: Bytes,
    service: Service,
}

impl Answer {
    /// The body as `T`, or an error naming what did not fit.
    pub fn json<T: DeserializeOwned>(&self) -> Result<T> {
        serde_json::from_slice(&self.body).map_err(|error| Error::Decode {
            service: self.service,
            message: format!("{error} in {}", preview(&self.body)),
        })
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|value| value.to_str().ok())
    }
}

fn preview(body: &[u8]) -> String {
    let text = String::from_utf8_lossy(body);
    let mut preview: String = text.chars().take(200).collect();
    if text.chars().count() > 200 {
        preview.push('…');
    }
    preview
}

fn request_id_of(headers: &http::HeaderMap) -> Option<String> {
    ["x-openstack-request-id", "x-compute-request-id"]
        .iter()
        .find_map(|name| headers.get(*name))
        .and_then(|value| value.to_str().ok())
        .map(str::to_owned)
}

impl Session {
    pub fn cloud(&self) -> &Arc<Cloud> {
        &self.cloud
    }

    pub fn credentials(&self) -> &Credentials {
        &self.credentials
    }

    /// A valid token: the one held, unless it expires within
    /// [`RENEW_BEFORE`], else a new one.
    pub async fn token(&self) -> Result<Arc<Token>> {
        let mut held = self.token.lock().await;
        if let Some(token) = held.as_ref() {
            let renew_at =
                token.expires_at - chrono::Duration::from_std(RENEW_BEFORE).unwrap_or_default();
            if chrono::Utc::now() < renew_at {
                return Ok(token.clone());
            }
        }
        let token = Arc::new(self.cloud.authenticate(&self.credentials).await?);
        *held = Some(token.clone());
        Ok(token)
    }

    /// Forgets `stale` (a service refused it) so the next call asks anew;
    /// a token another call renewed meanwhile is kept.
    async fn forget(&self, stale: &Arc<Token>) {
        let mut held = self.token.lock().await;
        if held.as_ref().is_some_and(|token| Arc::ptr_eq(token, stale)) {
            *held = None;
        }
    }

    /// The URL of `service` in this session's catalog.
    pub async fn endpoint(&self, service: Service) -> Result<String> {
        let token = self.token().await?;
        token.catalog.endpoint(
            service,
            self.cloud.config.interface,
            self.cloud.config.region.as_deref(),
        )
    }

    /// The microversions `service` speaks (lowest, highest), found once per
    /// endpoint from its version document.
    pub async fn microversions(&self, service: Service) -> Result<(Microversion, Microversion)> {
        let endpoint = self.endpoint(service).await?;
        if let Ok(known) = self.cloud.versions.lock()
            && let Some(range) = known.get(&endpoint)
        {
            return Ok(*range);
        }
        // With the trailing slash: Cinder redirects `/v3` to `/v3/`.
        let answer = self.call(Call::get(service, "/")).await?;
        let document: Value = answer.json()?;
        let range = Microversion::range_of(&document).ok_or_else(|| Error::Decode {
            service,
            message: format!(
                "the version document at {endpoint} names no microversions: {}",
                preview(&answer.body)
            ),
        })?;
        if let Ok(mut known) = self.cloud.versions.lock() {
            known.insert(endpoint, range);
        }
        Ok(range)
    }

    /// The id `name_or_id` of `kind` resolves to in this session's project:
    /// remembered for [`LOOKUP_TTL`] once `resolve` found it (a failure is
    /// never remembered).
    pub async fn remembered_id<F, Fut>(
        &self,
        kind: &'static str,
        name_or_id: &str,
        resolve: F,
    ) -> Result<String>
    where
        F: FnOnce() -> Fut,
        Fut: std::future::Future<Output = Result<String>>,
    {
        let project = self.token().await?.project_id.clone().unwrap_or_default();
        let key = (project, kind, name_or_id.to_owned());
        let turn = {
            let mut lookups = self.cloud.lookups();
            if let Some(id) = lookups.remembered(&key, std::time::Instant::now()) {
                return Ok(id);
            }
            lookups.under_way.entry(key.clone()).or_default().clone()
        };
        // Whoever resolved the key meanwhile left its answer (a failure
        // leaves none: the next in turn asks the service itself).
        let _turn = turn.lock().await;
        let remembered = {
            let mut lookups = self.cloud.lookups();
            let remembered = lookups.remembered(&key, std::time::Instant::now());
            if remembered.is_some() {
                lookups.done_with(&key, &turn);
            }
            remembered
        };
        if let Some(id) = remembered {
            return Ok(id);
        }
        let resolved = resolve().await;
        let mut lookups = self.cloud.lookups();
        lookups.done_with(&key, &turn);
        let id = resolved?;
        if lookups.found.len() >= LOOKUPS_KEPT {
            lookups.found.clear();
        }
        lookups
            .found
            .insert(key, (id.clone(), std::time::Instant::now() + LOOKUP_TTL));
        Ok(id)
    }

    /// [`Session::call`] of something that may be gone: the service's 404
    /// is `None`.
    pub async fn call_found(&self, call: Call) -> Result<Option<Answer>> {
        match self.call(call).await {
            Ok(answer) => Ok(Some(answer)),
            Err(error) if error.is_not_found() => Ok(None),
            Err(error) => Err(error),
        }
    }

    /// [`Session::call`] that removes something: what the service no
    /// longer has (404) is removed.
    pub async fn call_removing(&self, call: Call) -> Result<()> {
        match self.call(call).await {
            Ok(_) => Ok(()),
            Err(error) if error.is_not_found() => Ok(()),
            Err(error) => Err(error),
        }
    }

    /// Makes `call`, retrying as its [`Retry`] allows, and renewing the
    /// token once if the service refuses it. An error status is an
    /// [`Error::Api`] carrying the service's own message.
    pub async fn call(&self, call: Call) -> Result<Answer> {
        let mut attempt = 1;
        let mut renewed = false;
        let mut pause = FIRST_RETRY_PAUSE;
        loop {
            let token = self.token().await?;
            let outcome = self.call_once(&call, &token).await;
            match outcome {
                Err(Error::Api(api)) if api.status == 401 && !renewed => {
                    // The token was revoked or expired early: the call was
                    // refused before anything was done, so it is asked again.
                    renewed = true;
                    self.forget(&token).await;
                }
                Err(error)
                    if error.is_retryable()
                        && call.retry == Retry::Idempotent
                        && attempt < IDEMPOTENT_ATTEMPTS =>
                {
                    warn!(service = call.service.as_str(), method = %call.method, path = %call.path, attempt, %error, "retrying");
                    tokio::time::sleep(pause).await;
                    pause *= 2;
                    attempt += 1;
                }
                other => return other,
            }
        }
    }

    async fn call_once(&self, call: &Call, token: &Token) -> Result<Answer> {
        let endpoint = token.catalog.endpoint(
            call.service,
            self.cloud.config.interface,
            self.cloud.config.region.as_deref(),
        )?;
        let mut url = format!("{}{}", api_base(call.service, &endpoint), call.path);
        if !call.query.is_empty() {
            let query = form_urlencoded::Serializer::new(String::new())
                .extend_pairs(&call.query)
                .finish();
            url.push('?');
            url.push_str(&query);
        }
        let request_id = format!("req-{}", uuid::Uuid::new_v4());
        let mut request = http::Request::builder()
            .method(call.method.clone())
            .uri(&url)
            .header(http::header::ACCEPT, "application/json")
            .header("x-auth-token", token.value.expose())
            .header("x-openstack-request-id", &request_id);
        for (name, value) in &call.headers {
            request = request.header(name, value);
        }
        if let Some(version) = call.microversion {
            for (name, value) in version.headers(call.service) {
                request = request.header(name, value);
            }
        }
        let body = match &call.body {
            Some(body) => {
                request = request.header(http::header::CONTENT_TYPE, call.content_type);
                Bytes::from(body.to_string())
            }
            None => Bytes::new(),
        };
        let request = request
            .body(Full::new(body))
            .map_err(|error| Error::Decode {
                service: call.service,
                message: format!("cannot build {} {url}: {error}", call.method),
            })?;
        let started = std::time::Instant::now();
        let answer = self
            .cloud
            .http
            .send(request)
            .await
            .map_err(|message| Error::Unreachable {
                service: call.service,
                message: format!("{} {url}: {message}", call.method),
            })?;
        let status = answer.status.as_u16();
        debug!(
            service = call.service.as_str(),
            method = %call.method,
            url,
            status,
            request_id = request_id_of(&answer.headers).unwrap_or(request_id),
            elapsed_ms = started.elapsed().as_millis() as u64,
            "cloud call"
        );
        if answer.status.is_success() {
            return Ok(Answer {
                status,
                headers: answer.headers,
                body: answer.body,
                service: call.service,
            });
        }
        Err(Error::Api(ApiError {
            service: call.service,
            method: call.method.to_string(),
            path: call.path.clone(),
            status,
            message: message_of(status, &answer.body),
            request_id: request_id_of(&answer.headers),
        }))
    }
}

/// Where a service's API starts below its catalog URL: Keystone at `/v3`,
/// Neutron at `/v2.0`, Glance at `/v2` (clouds register them with or
/// without the version); Nova and Cinder register their versioned URL.
pub fn api_base(service: Service, endpoint: &str) -> String {
    let endpoint = endpoint.trim_end_matches('/');
    let version = match service {
        Service::Identity => return auth::v3_url(endpoint),
        Service::Network => "/v2.0",
        Service::Image => "/v2",
        Service::Compute | Service::BlockStorage => return endpoint.to_owned(),
    };
    if endpoint.ends_with(version) {
        endpoint.to_owned()
    } else {
        format!("{endpoint}{version}")
    }
}

/// A path segment with every character that is not plainly safe escaped
/// (key pair names, image names).
pub fn segment(text: &str) -> String {
    percent_encoding::utf8_percent_encode(text, percent_encoding::NON_ALPHANUMERIC).to_string()
}
