//! `auth.mode = "keystone"`: tokens are an existing Keystone's. The gateway
//! validates each one as keystonemiddleware does — `GET /v3/auth/tokens`
//! with the token as `X-Subject-Token` and its own service user's token as
//! `X-Auth-Token` — and caches the answer (good or bad) for a configured
//! time in a bounded cache keyed by the token's SHA-256. Keystone saying no
//! is a 401; Keystone unreachable, or refusing the service user, is a 503
//! naming it.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use bytes::Bytes;
use ember_runtime::Identity;
use ember_runtime::https::HttpsClient;
use http_body_util::Full;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

#[derive(Debug, Clone)]
pub struct KeystoneConfig {
    /// Keystone's URL, with or without `/v3`.
    pub url: String,
    /// The service user the gateway validates tokens as (it needs the
    /// `service` or `admin` role, as Keystone's policy asks).
    pub user: String,
    pub password: String,
    pub project: String,
    pub user_domain: String,
    pub project_domain: String,
    /// How long a validation is trusted before Keystone is asked again.
    pub cache_ttl: Duration,
    /// At most this many validations are kept.
    pub cache_size: usize,
    /// Extra CA certificates (PEM) for an https:// Keystone.
    pub ca_file: String,
    pub timeout: Duration,
}

#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
pub enum KeystoneError {
    /// Keystone does not accept the token.
    #[error("{0}")]
    Refused(String),
    /// Keystone cannot answer, or will not answer the gateway.
    #[error("{0}")]
    Unavailable(String),
}

struct Cached {
    result: Result<Identity, String>,
    until: Instant,
}

#[derive(Default)]
struct Cache {
    entries: HashMap<[u8; 32], Cached>,
    order: VecDeque<[u8; 32]>,
}

pub struct KeystoneValidator {
    config: KeystoneConfig,
    v3: String,
    client: HttpsClient,
    service_token: tokio::sync::Mutex<Option<(String, Instant)>>,
    cache: Mutex<Cache>,
}

impl std::fmt::Debug for KeystoneValidator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KeystoneValidator")
            .field("url", &self.v3)
            .finish()
    }
}

/// A service token is renewed this long before Keystone says it expires.
const RENEW_BEFORE: Duration = Duration::from_secs(120);

impl KeystoneValidator {
    pub fn new(config: KeystoneConfig) -> Result<KeystoneValidator, String> {
        let client = HttpsClient::new(&config.ca_file, "auth.keystone.ca_file", config.timeout)?;
        let base = config.url.trim_end_matches('/');
        let v3 = if base.ends_with("/v3") {
            base.to_owned()
        } else {
            format!("{base}/v3")
        };
        Ok(KeystoneValidator {
            config,
            v3,
            client,
            service_token: tokio::sync::Mutex::new(None),
            cache: Mutex::new(Cache::default()),
        })
    }

    /// The identity Keystone says `token` stands for.
    pub async fn validate(&self, token: &str) -> Result<Identity, KeystoneError> {
        let key: [u8; 32] = Sha256::digest(token.as_bytes()).into();
        if let Some(result) = self.cached(&key) {
            return result.map_err(KeystoneError::Refused);
        }
        match self.ask(token).await {
            Ok(identity) => {
                self.remember(key, Ok(identity.clone()));
                Ok(identity)
            }
            Err(KeystoneError::Refused(reason)) => {
                self.remember(key, Err(reason.clone()));
                Err(KeystoneError::Refused(reason))
            }
            Err(unavailable) => Err(unavailable),
        }
    }

    fn cached(&self, key: &[u8; 32]) -> Option<Result<Identity, String>> {
        let cache = match self.cache.lock() {
            Ok(cache) => cache,
            Err(poisoned) => poisoned.into_inner(),
        };
        cache
            .entries
            .get(key)
            .filter(|entry| entry.until > Instant::now())
            .map(|entry| entry.result.clone())
    }

    fn remember(&self, key: [u8; 32], result: Result<Identity, String>) {
        if self.config.cache_size == 0 || self.config.cache_ttl.is_zero() {
            return;
        }
        let mut cache = match self.cache.lock() {
            Ok(cache) => cache,
            Err(poisoned) => poisoned.into_inner(),
        };
        let until = Instant::now() + self.config.cache_ttl;
        if cache
            .entries
            .insert(key, Cached { result, until })
            .is_none()
        {
            cache.order.push_back(key);
        }
        while cache.entries.len() > self.config.cache_size {
            match cache.order.pop_front() {
                Some(oldest) => {
                    cache.entries.remove(&oldest);
                }
                None => break,
            }
        }
    }

    async fn ask(&self, token: &str) -> Result<Identity, KeystoneError> {
        for attempt in 0..2 {
            let service = self.service_token(attempt > 0).await?;
            let request = http::Request::get(format!("{}/auth/tokens", self.v3))
                .header("x-auth-token", service.as_str())
                .header("x-subject-token", token)
                .header(http::header::ACCEPT, "application/json")
                .body(Full::new(Bytes::new()))
                .map_err(|_| {
                    KeystoneError::Refused("the token cannot travel in a header".to_owned())
                })?;
            let answer = self.client.send(request).await.map_err(|error| {
                KeystoneError::Unavailable(format!(
                    "Keystone at {} is unavailable: {error}",
                    self.v3
                ))
            })?;
            match answer.status.as_u16() {
                200 => return identity_of(&answer.body),
                404 => {
                    return Err(KeystoneError::Refused(
                        "Keystone does not accept this token (expired, revoked or not issued by it): authenticate again".to_owned(),
                    ));
                }
                // The service token itself expired or was revoked: get a
                // new one once.
                401 if attempt == 0 => continue,
                401 | 403 => {
                    return Err(KeystoneError::Unavailable(format!(
                        "Keystone at {} refuses the gateway's service user {:?} ({}): check auth.keystone and give the user the service or admin role",
                        self.v3, self.config.user, answer.status
                    )));
                }
                _ => {
                    return Err(KeystoneError::Unavailable(format!(
                        "Keystone at {} answered {} validating a token",
                        self.v3, answer.status
                    )));
                }
            }
        }
        Err(KeystoneError::Unavailable(format!(
            "Keystone at {} keeps refusing the gateway's service token",
            self.v3
        )))
    }

    async fn service_token(&self, renew: bool) -> Result<String, KeystoneError> {
        let mut held = self.service_token.lock().await;
        if !renew
            && let Some((token, renew_at)) = held.as_ref()
            && *renew_at > Instant::now()
        {
            return Ok(token.clone());
        }
        let body = json!({"auth": {
            "identity": {"methods": ["password"], "password": {"user": {
                "name": self.config.user,
                "domain": {"name": self.config.user_domain},
                "password": self.config.password,
            }}},
            "scope": {"project": {
                "name": self.config.project,
                "domain": {"name": self.config.project_domain},
            }},
        }});
        let request = http::Request::post(format!("{}/auth/tokens?nocatalog", self.v3))
            .header(http::header::CONTENT_TYPE, "application/json")
            .body(Full::new(Bytes::from(body.to_string())))
            .map_err(|error| KeystoneError::Unavailable(format!("Keystone request: {error}")))?;
        let answer = self.client.send(request).await.map_err(|error| {
            KeystoneError::Unavailable(format!("Keystone at {} is unavailable: {error}", self.v3))
        })?;
        if answer.status != http::StatusCode::CREATED {
            return Err(KeystoneError::Unavailable(format!(
                "Keystone at {} refuses the gateway's service user {:?} ({}): check auth.keystone",
                self.v3, self.config.user, answer.status
            )));
        }
        let token = answer
            .headers
            .get("x-subject-token")
            .and_then(|value| value.to_str().ok())
            .ok_or_else(|| {
                KeystoneError::Unavailable(format!(
                    "Keystone at {} issued no X-Subject-Token",
                    self.v3
                ))
            })?
            .to_owned();
        let lifetime = serde_json::from_slice::<Value>(&answer.body)
            .ok()
            .and_then(|body| {
                let expires_at = body["token"]["expires_at"].as_str()?.to_owned();
                let expires_at = chrono::DateTime::parse_from_rfc3339(&expires_at).ok()?;
                (expires_at.with_timezone(&chrono::Utc) - chrono::Utc::now())
                    .to_std()
                    .ok()
            })
            .unwrap_or(Duration::from_secs(600));
        let renew_at = Instant::now() + lifetime.saturating_sub(RENEW_BEFORE);
        *held = Some((token.clone(), renew_at));
        Ok(token)
    }
}

/// The Ember identity of a Keystone token body: its user's id, its
/// project's id and its roles' names (roles whose names cannot travel in
/// Ember's identity headers are left out).
fn identity_of(body: &[u8]) -> Result<Identity, KeystoneError> {
    let body: Value = serde_json::from_slice(body).map_err(|error| {
        KeystoneError::Unavailable(format!("Keystone's token body is not JSON: {error}"))
    })?;
    let token = &body["token"];
    let user = token["user"]["id"].as_str().unwrap_or_default();
    let Some(project) = token["project"]["id"].as_str() else {
        return Err(KeystoneError::Refused(
            "the token is not scoped to a project: Ember needs project-scoped tokens".to_owned(),
        ));
    };
    let roles = token["roles"]
        .as_array()
        .map(|roles| {
            roles
                .iter()
                .filter_map(|role| role["name"].as_str())
                .filter(|name| {
                    Identity::new("u", "p", vec![(*name).to_owned()])
                        .validate()
                        .is_ok()
                })
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default();
    let identity = Identity::new(user, project, roles);
    identity.validate().map_err(|error| {
        KeystoneError::Refused(format!(
            "Keystone's token names an identity Ember cannot use: {error}"
        ))
    })?;
    Ok(identity)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_project_token_becomes_an_identity_and_an_unscoped_one_is_refused() {
        let body = json!({"token": {
            "user": {"id": "0123abcd", "name": "demo"},
            "project": {"id": "89ef", "name": "demo"},
            "roles": [{"name": "member"}, {"name": "load balancer member"}, {"name": "reader"}],
        }});
        let identity = identity_of(body.to_string().as_bytes()).expect("identity");
        assert_eq!(identity.user_id, "0123abcd");
        assert_eq!(identity.project_id, "89ef");
        assert_eq!(identity.roles, ["member", "reader"]);
        let unscoped = json!({"token": {"user": {"id": "0123abcd"}, "roles": []}});
        assert!(matches!(
            identity_of(unscoped.to_string().as_bytes()),
            Err(KeystoneError::Refused(message)) if message.contains("project-scoped")
        ));
    }

    #[test]
    fn the_cache_keeps_at_most_its_size_and_forgets_the_oldest() {
        let validator = KeystoneValidator::new(KeystoneConfig {
            url: "http://127.0.0.1:1/identity".into(),
            user: "ember".into(),
            password: "x".into(),
            project: "service".into(),
            user_domain: "Default".into(),
            project_domain: "Default".into(),
            cache_ttl: Duration::from_secs(60),
            cache_size: 2,
            ca_file: String::new(),
            timeout: Duration::from_secs(1),
        })
        .expect("validator");
        assert_eq!(validator.v3, "http://127.0.0.1:1/identity/v3");
        for index in 0u8..3 {
            validator.remember([index; 32], Err(format!("bad {index}")));
        }
        assert!(
            validator.cached(&[0; 32]).is_none(),
            "the oldest was evicted"
        );
        assert_eq!(validator.cached(&[2; 32]), Some(Err("bad 2".to_owned())));
        let cache = validator.cache.lock().expect("lock");
        assert_eq!(cache.entries.len(), 2);
    }
}
