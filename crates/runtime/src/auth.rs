//! Signed bearer tokens (JWT, HS256) that carry an [`Identity`].
//!
//! `ember token issue` mints them, the gateway verifies them. Verification
//! errors name what is wrong (expired, forged, malformed) so a person can fix
//! their setup without reading logs.

use std::time::Duration;

use jsonwebtoken::{
    Algorithm, DecodingKey, EncodingKey, Header, Validation, errors::ErrorKind as JwtErrorKind,
};
use serde::{Deserialize, Serialize};

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
}

#[derive(Debug, Serialize, Deserialize)]
struct Claims {
    sub: String,
    project: String,
    roles: Vec<String>,
    iss: String,
    iat: i64,
    exp: i64,
}

/// Issues and verifies tokens with one deployment-wide secret.
#[derive(Clone)]
pub struct TokenSigner {
    encoding: EncodingKey,
    decoding: DecodingKey,
    validation: Validation,
}

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
        TokenSigner {
            encoding: EncodingKey::from_secret(signing_key.as_bytes()),
            decoding: DecodingKey::from_secret(signing_key.as_bytes()),
            validation,
        }
    }

    pub fn issue(&self, identity: &Identity, ttl: Duration) -> Result<String, TokenError> {
        self.issue_at(identity, chrono::Utc::now().timestamp(), ttl)
    }

    /// Issues a token as if it were `now` (seconds since the epoch).
    fn issue_at(&self, identity: &Identity, now: i64, ttl: Duration) -> Result<String, TokenError> {
        identity.validate().map_err(TokenError::InvalidIdentity)?;
        let ttl_secs = i64::try_from(ttl.as_secs()).unwrap_or(i64::MAX / 2);
        let claims = Claims {
            sub: identity.user_id.clone(),
            project: identity.project_id.clone(),
            roles: identity.roles.clone(),
            iss: ISSUER.to_owned(),
            iat: now,
            exp: now.saturating_add(ttl_secs),
        };
        jsonwebtoken::encode(&Header::new(Algorithm::HS256), &claims, &self.encoding)
            .map_err(|error| TokenError::Malformed(error.to_string()))
    }

    pub fn verify(&self, token: &str) -> Result<Identity, TokenError> {
        let data = jsonwebtoken::decode::<Claims>(token, &self.decoding, &self.validation)
            .map_err(|error| match error.kind() {
                JwtErrorKind::ExpiredSignature => TokenError::Expired {
                    expired_at: expiry_of(token).unwrap_or_else(|| "an earlier time".to_owned()),
                },
                JwtErrorKind::InvalidSignature => TokenError::Forged,
                other => TokenError::Malformed(format!("{other:?}").to_lowercase()),
            })?;
        let identity = Identity {
            user_id: data.claims.sub,
            project_id: data.claims.project,
            roles: data.claims.roles,
        };
        identity.validate().map_err(TokenError::InvalidIdentity)?;
        Ok(identity)
    }
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

    #[test]
    fn an_issued_token_verifies_to_the_same_identity() {
        let signer = TokenSigner::new("a-signing-key-of-enough-length-000");
        let token = signer
            .issue(&alice(), Duration::from_secs(60))
            .expect("issued");
        assert_eq!(signer.verify(&token).expect("valid"), alice());
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
