//! Signed bearer tokens (JWT, HS256) that carry an [`Identity`].
//!
//! `ember token issue` mints them, the gateway verifies them. Verification
//! errors name what is wrong (expired, forged, malformed) so a person can fix
//! their setup without reading logs.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use jsonwebtoken::{
    Algorithm, DecodingKey, EncodingKey, Header, Validation, errors::ErrorKind as JwtErrorKind,
};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::identity::Identity;

const ISSUER: &str = "ember";

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum TokenError {
    #[error("the token expired at {expired_at}: issue a new one with `ember token issue`")]
    Expired { expired_at: String },
    #[error("the token's signature does not match this deployment's signing key")]
    Forged,
    #[error("the token is malformed: {0}")]
    Malformed(String),
    #[error("the token's identity is invalid: {0}")]
    InvalidIdentity(String),
    #[error("the token is not valid before {not_before}: wait, or check this machine's clock")]
    NotYetValid { not_before: String },
    #[error(
        "the token was issued at {issued_at}, in the future: check the clock of the machine that issued it"
    )]
    IssuedInTheFuture { issued_at: String },
}

#[derive(Debug, Serialize, Deserialize)]
struct Claims {
    sub: String,
    project: String,
    roles: Vec<String>,
    iss: String,
    iat: i64,
    exp: i64,
    /// Not before: tokens Ember issues have none; others may.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    nbf: Option<i64>,
    /// The token's own id, by which it can be revoked.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    jti: String,
    /// `iat` in milliseconds: a revocation of a user's tokens "issued up
    /// to now" must not catch the token issued a moment later in the same
    /// second.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    iat_ms: Option<i64>,
    /// The user's and the project's names, when they differ from the ids.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    user_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    project_name: Option<String>,
    /// How the token was obtained (Keystone's `methods`: `password`,
    /// `token`); empty for tokens `ember token issue` minted.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    methods: Vec<String>,
}

/// Everything a token says: the identity, and what a Keystone client is
/// told of the token itself (its id, names, methods and lifetime).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenDetails {
    pub identity: Identity,
    /// The token's id (`jti`), by which it is revoked; tokens minted before
    /// ids existed have an empty one.
    pub token_id: String,
    pub user_name: Option<String>,
    pub project_name: Option<String>,
    pub methods: Vec<String>,
    /// Seconds since the epoch.
    pub issued_at: i64,
    /// Milliseconds since the epoch (tokens without it: `issued_at` × 1000).
    pub issued_at_ms: i64,
    pub expires_at: i64,
}

impl TokenDetails {
    /// Details for a new token of `identity`, valid from now for `ttl`.
    pub fn new(identity: Identity, ttl: Duration) -> TokenDetails {
        let now_ms = chrono::Utc::now().timestamp_millis();
        let now = now_ms.div_euclid(1000);
        let ttl_secs = i64::try_from(ttl.as_secs()).unwrap_or(i64::MAX / 2);
        TokenDetails {
            identity,
            token_id: new_token_id(),
            user_name: None,
            project_name: None,
            methods: Vec::new(),
            issued_at: now,
            issued_at_ms: now_ms,
            expires_at: now.saturating_add(ttl_secs),
        }
    }
}

/// A fresh token id: 22 URL-safe characters (128 random bits), the shape
/// of Keystone's audit ids.
pub fn new_token_id() -> String {
    use rand::RngCore;
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let mut bytes = [0u8; 22];
    rand::rng().fill_bytes(&mut bytes);
    bytes
        .iter()
        .map(|byte| char::from(ALPHABET[usize::from(byte & 63)]))
        .collect()
}

/// How far ahead of this machine's clock a token's `iat` or `nbf` may be
/// (clocks of replicas drift a little), by default.
pub const DEFAULT_CLOCK_SKEW: Duration = Duration::from_secs(60);

/// Issues and verifies tokens with one deployment-wide secret.
#[derive(Clone)]
pub struct TokenSigner {
    encoding: EncodingKey,
    decoding: DecodingKey,
    validation: Validation,
    clock_skew: i64,
    /// Tokens verified before, by the SHA-256 of their whole text
    /// (signature included; the tokens themselves are not kept, as
    /// keystonemiddleware keeps none), with what they said: a client sends
    /// one token with every request, and checking its signature and
    /// decoding its claims each time was a twentieth of the CPU of a `GET`
    /// of a stack. Only what cannot change is kept — a remembered token's
    /// expiry is checked on every use, and revocations are the caller's to
    /// check, on every use as before.
    verified: Arc<Mutex<HashMap<[u8; 32], TokenDetails>>>,
}

/// Tokens a signer remembers at most (a few MB); past that, the expired
/// ones are forgotten, or all of them.
const REMEMBERED_TOKENS: usize = 4096;

impl std::fmt::Debug for TokenSigner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("TokenSigner(..)")
    }
}

impl TokenSigner {
    pub fn new(signing_key: &str) -> Self {
        let mut validation = Validation::new(Algorithm::HS256);
        validation.set_issuer(&[ISSUER]);
        validation.set_required_spec_claims(&["exp", "iss", "sub"]);
        validation.leeway = 0;
        // `nbf` and `iat` are checked below, with the clock skew.
        validation.validate_nbf = false;
        TokenSigner {
            encoding: EncodingKey::from_secret(signing_key.as_bytes()),
            decoding: DecodingKey::from_secret(signing_key.as_bytes()),
            validation,
            clock_skew: DEFAULT_CLOCK_SKEW.as_secs() as i64,
            verified: Arc::default(),
        }
    }

    /// Accepts `iat` and `nbf` at most `skew` ahead of this machine's clock.
    pub fn with_clock_skew(mut self, skew: Duration) -> Self {
        self.clock_skew = i64::try_from(skew.as_secs()).unwrap_or(i64::MAX / 2);
        // What the other skew let through is not this signer's to reuse.
        self.verified = Arc::default();
        self
    }

    pub fn issue(&self, identity: &Identity, ttl: Duration) -> Result<String, TokenError> {
        self.issue_details(&TokenDetails::new(identity.clone(), ttl))
    }

    /// Issues a token as if it were `now` (seconds since the epoch).
    #[cfg(test)]
    fn issue_at(&self, identity: &Identity, now: i64, ttl: Duration) -> Result<String, TokenError> {
        let mut details = TokenDetails::new(identity.clone(), ttl);
        let ttl_secs = i64::try_from(ttl.as_secs()).unwrap_or(i64::MAX / 2);
        details.issued_at = now;
        details.issued_at_ms = now.saturating_mul(1000);
        details.expires_at = now.saturating_add(ttl_secs);
        self.issue_details(&details)
    }

    /// Issues the token `details` describe.
    pub fn issue_details(&self, details: &TokenDetails) -> Result<String, TokenError> {
        let identity = &details.identity;
        identity.validate().map_err(TokenError::InvalidIdentity)?;
        let claims = Claims {
            sub: identity.user_id.clone(),
            project: identity.project_id.clone(),
            roles: identity.roles.clone(),
            iss: ISSUER.to_owned(),
            iat: details.issued_at,
            exp: details.expires_at,
            nbf: None,
            jti: details.token_id.clone(),
            iat_ms: Some(details.issued_at_ms),
            user_name: details.user_name.clone(),
            project_name: details.project_name.clone(),
            methods: details.methods.clone(),
        };
        jsonwebtoken::encode(&Header::new(Algorithm::HS256), &claims, &self.encoding)
            .map_err(|error| TokenError::Malformed(error.to_string()))
    }

    pub fn verify(&self, token: &str) -> Result<Identity, TokenError> {
        self.verify_details(token).map(|details| details.identity)
    }

    /// Verifies a token and returns everything it says.
    pub fn verify_details(&self, token: &str) -> Result<TokenDetails, TokenError> {
        let now = chrono::Utc::now().timestamp();
        let key: [u8; 32] = Sha256::digest(token.as_bytes()).into();
        let mut verified = self.verified.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(details) = verified.get(&key) {
            // Expired as the decoder has it: once `exp` is in the past.
            if details.expires_at >= now {
                return Ok(details.clone());
            }
            let expired_at = time_text(details.expires_at);
            verified.remove(&key);
            return Err(TokenError::Expired { expired_at });
        }
        drop(verified);
        let details = self.decode(token)?;
        let mut verified = self.verified.lock().unwrap_or_else(PoisonError::into_inner);
        if verified.len() >= REMEMBERED_TOKENS {
            verified.retain(|_, details| details.expires_at >= now);
            if verified.len() >= REMEMBERED_TOKENS {
                verified.clear();
            }
        }
        verified.insert(key, details.clone());
        Ok(details)
    }

    /// Checks a token's signature and claims, and reads them.
    fn decode(&self, token: &str) -> Result<TokenDetails, TokenError> {
        let data = jsonwebtoken::decode::<Claims>(token, &self.decoding, &self.validation)
            .map_err(|error| match error.kind() {
                JwtErrorKind::ExpiredSignature => TokenError::Expired {
                    expired_at: expiry_of(token).unwrap_or_else(|| "an earlier time".to_owned()),
                },
                JwtErrorKind::InvalidSignature => TokenError::Forged,
                other => TokenError::Malformed(format!("{other:?}").to_lowercase()),
            })?;
        let horizon = chrono::Utc::now()
            .timestamp()
            .saturating_add(self.clock_skew);
        if let Some(not_before) = data.claims.nbf.filter(|not_before| *not_before > horizon) {
            return Err(TokenError::NotYetValid {
                not_before: time_text(not_before),
            });
        }
        if data.claims.iat > horizon {
            return Err(TokenError::IssuedInTheFuture {
                issued_at: time_text(data.claims.iat),
            });
        }
        let claims = data.claims;
        let identity = Identity {
            user_id: claims.sub,
            project_id: claims.project,
            roles: claims.roles,
        };
        identity.validate().map_err(TokenError::InvalidIdentity)?;
        Ok(TokenDetails {
            identity,
            token_id: claims.jti,
            user_name: claims.user_name,
            project_name: claims.project_name,
            methods: claims.methods,
            issued_at: claims.iat,
            issued_at_ms: claims
                .iat_ms
                .filter(|ms| ms.div_euclid(1000) == claims.iat)
                .unwrap_or(claims.iat.saturating_mul(1000)),
            expires_at: claims.exp,
        })
    }
}

/// A claim's time (seconds since the epoch) as errors name it.
fn time_text(at: i64) -> String {
    chrono::DateTime::from_timestamp(at, 0)
        .map(|time| time.to_rfc3339())
        .unwrap_or_else(|| at.to_string())
}

/// The `exp` claim of a token whose signature was already checked by the
/// caller's decode attempt, for the error message only.
fn expiry_of(token: &str) -> Option<String> {
    let payload = token.split('.').nth(1)?;
    let bytes = base64_url_decode(payload)?;
    let value: serde_json::Value = serde_json::from_slice(&bytes).ok()?;
    let exp = value.get("exp")?.as_i64()?;
    chrono::DateTime::from_timestamp(exp, 0).map(|time| time.to_rfc3339())
}

fn base64_url_decode(input: &str) -> Option<Vec<u8>> {
    let mut bits: u32 = 0;
    let mut bit_count = 0;
    let mut out = Vec::with_capacity(input.len() * 3 / 4);
    for byte in input.bytes() {
        let value = match byte {
            b'A'..=b'Z' => byte - b'A',
            b'a'..=b'z' => byte - b'a' + 26,
            b'0'..=b'9' => byte - b'0' + 52,
            b'-' => 62,
            b'_' => 63,
            b'=' => continue,
            _ => return None,
        };
        bits = (bits << 6) | u32::from(value);
        bit_count += 6;
        if bit_count >= 8 {
            bit_count -= 8;
            out.push(((bits >> bit_count) & 0xff) as u8);
        }
    }
    Some(out)
}

/// A fresh random secret, hex encoded, for signing keys and credentials.
pub fn random_secret() -> String {
    use rand::RngCore;
    let mut bytes = [0u8; 32];
    rand::rng().fill_bytes(&mut bytes);
    bytes.iter().map(|byte| format!("{byte:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn alice() -> Identity {
        Identity::new("alice", "project-a", vec!["member".into()])
    }

    /// A signer, and a token of alice's it issued for a minute.
    fn signer_and_token() -> (TokenSigner, String) {
        let signer = TokenSigner::new("test-signing-key-0123456789abcdef");
        let token = signer
            .issue(&alice(), Duration::from_secs(60))
            .expect("issued");
        (signer, token)
    }

    fn remembered(signer: &TokenSigner) -> usize {
        signer.verified.lock().expect("lock").len()
    }

    #[test]
    fn a_verified_token_is_remembered_and_a_changed_one_checked_again() {
        let (signer, token) = signer_and_token();
        assert_eq!(signer.verify(&token).expect("valid"), alice());
        assert_eq!(remembered(&signer), 1);
        assert_eq!(signer.verify(&token).expect("valid again"), alice());
        assert_eq!(remembered(&signer), 1);
        // Another signature, another payload: not the token remembered.
        let (signed, signature) = token.rsplit_once('.').expect("three parts");
        // (The first character: all six of its bits are the signature's.)
        let first = if signature.starts_with('A') { "B" } else { "A" };
        let forged = format!("{signed}.{first}{}", &signature[1..]);
        assert_eq!(signer.verify(&forged), Err(TokenError::Forged));
        let other = TokenSigner::new("test-signing-key-0123456789abcdef")
            .issue(
                &Identity::new("mallory", "project-a", vec!["admin".into()]),
                Duration::from_secs(60),
            )
            .expect("issued");
        let (payload, _) = other.rsplit_once('.').expect("three parts");
        assert_eq!(
            signer.verify(&format!("{payload}.{signature}")),
            Err(TokenError::Forged)
        );
        // Another signer (another key) remembers nothing of this one's.
        assert_eq!(
            TokenSigner::new("another-signing-key-0123456789abcd").verify(&token),
            Err(TokenError::Forged)
        );
    }

    #[test]
    fn a_remembered_token_still_expires() {
        let (signer, token) = signer_and_token();
        let mut details = signer.verify_details(&token).expect("valid");
        // As if its hour had passed since it was remembered.
        let past = chrono::Utc::now().timestamp() - 5;
        details.expires_at = past;
        signer
            .verified
            .lock()
            .expect("lock")
            .insert(Sha256::digest(token.as_bytes()).into(), details);
        assert_eq!(
            signer.verify(&token),
            Err(TokenError::Expired {
                expired_at: time_text(past)
            })
        );
        assert_eq!(remembered(&signer), 0, "forgotten once expired");
    }

    #[test]
    fn remembered_tokens_are_bounded() {
        let (signer, token) = signer_and_token();
        let details = signer.verify_details(&token).expect("valid");
        let now = chrono::Utc::now().timestamp();
        let fill = |expired: usize| {
            let mut verified = signer.verified.lock().expect("lock");
            verified.clear();
            for index in 0..REMEMBERED_TOKENS {
                let mut details = details.clone();
                if index < expired {
                    details.expires_at = now - 10;
                }
                verified.insert(Sha256::digest(format!("token-{index}")).into(), details);
            }
        };
        // Full, some expired: those are forgotten.
        fill(10);
        signer.verify(&token).expect("valid");
        assert_eq!(remembered(&signer), REMEMBERED_TOKENS - 10 + 1);
        // Full of live ones: all are forgotten but the new one.
        fill(0);
        signer.verify(&token).expect("valid");
        assert_eq!(remembered(&signer), 1);
    }

    #[test]
    fn a_signer_given_another_clock_skew_starts_afresh() {
        let (signer, token) = signer_and_token();
        signer.verify(&token).expect("valid");
        let strict = signer.clone().with_clock_skew(Duration::from_secs(0));
        assert_eq!(remembered(&strict), 0);
        assert_eq!(remembered(&signer), 1);
    }

    #[test]
    fn an_issued_token_verifies_to_the_same_identity() {
        let signer = TokenSigner::new("a-signing-key-of-enough-length-000");
        let token = signer
            .issue(&alice(), Duration::from_secs(60))
            .expect("issued");
        assert_eq!(signer.verify(&token).expect("valid"), alice());
    }

    #[test]
    fn a_tokens_details_survive_the_round_trip_and_each_token_has_its_own_id() {
        let signer = TokenSigner::new("a-signing-key-of-enough-length-000");
        let mut details = TokenDetails::new(alice(), Duration::from_secs(60));
        details.user_name = Some("Alice".into());
        details.project_name = Some("Project A".into());
        details.methods = vec!["password".into()];
        let token = signer.issue_details(&details).expect("issued");
        assert_eq!(signer.verify_details(&token).expect("valid"), details);
        assert_eq!(details.token_id.len(), 22);
        let minted = signer
            .issue(&alice(), Duration::from_secs(60))
            .expect("issued");
        let minted = signer.verify_details(&minted).expect("valid");
        assert_ne!(minted.token_id, details.token_id);
        assert!(minted.methods.is_empty() && minted.user_name.is_none());
    }

    #[test]
    fn a_token_signed_with_another_key_is_forged() {
        let token = TokenSigner::new("key-one-key-one-key-one-key-one-1")
            .issue(&alice(), Duration::from_secs(60))
            .expect("issued");
        let error = TokenSigner::new("key-two-key-two-key-two-key-two-2")
            .verify(&token)
            .expect_err("forged");
        assert_eq!(error, TokenError::Forged);
    }

    #[test]
    fn an_expired_token_says_when_it_expired() {
        let signer = TokenSigner::new("a-signing-key-of-enough-length-000");
        let an_hour_ago = chrono::Utc::now().timestamp() - 3600;
        let token = signer
            .issue_at(&alice(), an_hour_ago, Duration::from_secs(60))
            .expect("issued");
        let error = signer.verify(&token).expect_err("expired");
        assert!(matches!(error, TokenError::Expired { .. }), "{error:?}");
        assert!(error.to_string().contains("expired at 20"), "{error}");
    }

    /// A token signed with the right key but claims this signer would not
    /// write (another issuer's `nbf`, a clock far ahead).
    fn token_with(signer_key: &str, claims: serde_json::Value) -> String {
        jsonwebtoken::encode(
            &Header::new(Algorithm::HS256),
            &claims,
            &EncodingKey::from_secret(signer_key.as_bytes()),
        )
        .expect("encoded")
    }

    #[test]
    fn tokens_from_the_future_are_refused_beyond_the_clock_skew() {
        let key = "a-signing-key-of-enough-length-000";
        let signer = TokenSigner::new(key);
        let now = chrono::Utc::now().timestamp();
        let claims = |iat: i64, nbf: Option<i64>| {
            let mut claims = serde_json::json!({"sub": "alice", "project": "project-a",
                "roles": ["member"], "iss": "ember", "iat": iat, "exp": now + 3600});
            if let Some(nbf) = nbf {
                claims["nbf"] = serde_json::json!(nbf);
            }
            claims
        };
        // An hour ahead: refused, naming the time.
        let error = signer
            .verify(&token_with(key, claims(now, Some(now + 3600))))
            .expect_err("not yet valid");
        assert!(matches!(error, TokenError::NotYetValid { .. }), "{error:?}");
        assert!(error.to_string().contains("not valid before 20"), "{error}");
        let error = signer
            .verify(&token_with(key, claims(now + 365 * 86_400, None)))
            .expect_err("issued in the future");
        assert!(
            matches!(error, TokenError::IssuedInTheFuture { .. }),
            "{error:?}"
        );
        // Within the skew (a replica's clock a little ahead): accepted.
        signer
            .verify(&token_with(key, claims(now + 30, Some(now + 30))))
            .expect("within the default 60 s");
        let strict = TokenSigner::new(key).with_clock_skew(Duration::from_secs(5));
        assert!(
            strict
                .verify(&token_with(key, claims(now + 30, None)))
                .is_err(),
            "the skew is configurable"
        );
        // A past nbf is fine.
        signer
            .verify(&token_with(key, claims(now - 10, Some(now - 10))))
            .expect("valid");
    }

    #[test]
    fn garbage_is_malformed() {
        let signer = TokenSigner::new("a-signing-key-of-enough-length-000");
        assert!(matches!(
            signer.verify("not-a-jwt"),
            Err(TokenError::Malformed(_))
        ));
    }

    #[test]
    fn identities_with_unsafe_names_are_not_issued() {
        let signer = TokenSigner::new("a-signing-key-of-enough-length-000");
        let error = signer
            .issue(&Identity::new("bob\n", "p", vec![]), Duration::from_secs(5))
            .expect_err("refused");
        assert!(matches!(error, TokenError::InvalidIdentity(_)));
    }

    #[test]
    fn random_secrets_differ() {
        assert_ne!(random_secret(), random_secret());
        assert_eq!(random_secret().len(), 64);
    }
}
