//! Authentication at the door: every request except health, metrics,
//! reflection, version discovery and the Keystone front door's token
//! requests must carry a token, as `X-Auth-Token` (OpenStack clients) or
//! `Authorization: Bearer` (gRPC, curl). [`Authenticator`] decides who is
//! behind it — the built-in identity (Ember's signed tokens, minus revoked
//! ones) or an external Keystone. The verified identity is what the
//! internal services see; anything the caller sent in identity headers is
//! discarded.

use std::sync::Arc;

use http::HeaderMap;

use ember_runtime::auth::{TokenDetails, TokenError, TokenSigner};
use ember_runtime::{ErrorKind, Identity};

use crate::identity::Directory;
use crate::identity::keystone::{KeystoneError, KeystoneValidator};

pub const AUTH_TOKEN_HEADER: &str = "x-auth-token";

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum AuthError {
    #[error(
        "authentication required: send a token as X-Auth-Token or Authorization: Bearer (get one with `openstack token issue`, POST /identity/v3/auth/tokens or `ember token issue`)"
    )]
    Missing,
    #[error("authorization header must be `Bearer <token>`")]
    WrongScheme,
    #[error("{0}")]
    Invalid(#[from] TokenError),
    #[error("the token was revoked: authenticate again")]
    Revoked,
    #[error("{0}")]
    KeystoneRefused(String),
    #[error("{0}")]
    KeystoneUnavailable(String),
}

impl AuthError {
    pub fn kind(&self) -> ErrorKind {
        match self {
            AuthError::KeystoneUnavailable(_) => ErrorKind::Unavailable,
            _ => ErrorKind::Unauthenticated,
        }
    }
}

/// The token a request carries, if any.
pub fn token_of(headers: &HeaderMap) -> Result<&str, AuthError> {
    if let Some(value) = headers.get(AUTH_TOKEN_HEADER) {
        return value
            .to_str()
            .map(str::trim)
            .map_err(|_| AuthError::Missing);
    }
    match headers.get(http::header::AUTHORIZATION) {
        None => Err(AuthError::Missing),
        Some(value) => {
            let value = value.to_str().map_err(|_| AuthError::WrongScheme)?;
            match value.split_once(' ') {
                Some((scheme, token)) if scheme.eq_ignore_ascii_case("bearer") => Ok(token.trim()),
                _ => Err(AuthError::WrongScheme),
            }
        }
    }
}

/// The request's token when it is a Keystone token (not one of Ember's
/// own: those are JWTs, three dot-separated parts; Keystone's Fernet
/// tokens have no dots).
pub fn keystone_token_of(headers: &HeaderMap) -> Option<&str> {
    token_of(headers)
        .ok()
        .filter(|token| !token.is_empty() && token.split('.').count() != 3)
}

/// The request's token, checked against `signer` (revocations aside).
pub fn authenticate(signer: &TokenSigner, headers: &HeaderMap) -> Result<Identity, AuthError> {
    let token = token_of(headers)?;
    if token.is_empty() {
        return Err(AuthError::Missing);
    }
    Ok(signer.verify(token)?)
}

/// Who may be behind a token: the built-in identity (Ember's signed
/// tokens, minus revoked ones) or an existing Keystone.
#[derive(Clone, Debug)]
pub enum Authenticator {
    BuiltIn {
        signer: TokenSigner,
        directory: Directory,
    },
    /// Tokens are Keystone's; Ember's own signed tokens (`ember token
    /// issue`, for operators) are still accepted.
    Keystone {
        signer: TokenSigner,
        validator: Arc<KeystoneValidator>,
    },
}

impl Authenticator {
    pub fn signer(&self) -> &TokenSigner {
        match self {
            Authenticator::BuiltIn { signer, .. } | Authenticator::Keystone { signer, .. } => {
                signer
            }
        }
    }

    /// The built-in identity, when this gateway serves it.
    pub fn directory(&self) -> Option<&Directory> {
        match self {
            Authenticator::BuiltIn { directory, .. } => Some(directory),
            Authenticator::Keystone { .. } => None,
        }
    }

    /// The identity behind the request's token.
    pub async fn authenticate(&self, headers: &HeaderMap) -> Result<Identity, AuthError> {
        let token = token_of(headers)?;
        if token.is_empty() {
            return Err(AuthError::Missing);
        }
        self.verify(token).await
    }

    pub async fn verify(&self, token: &str) -> Result<Identity, AuthError> {
        match self {
            Authenticator::BuiltIn { .. } => {
                self.verify_details(token).map(|details| details.identity)
            }
            Authenticator::Keystone { signer, validator } => {
                // Ember's own tokens are JWTs (three dot-separated parts);
                // Keystone's (Fernet) are not.
                if token.split('.').count() == 3 {
                    return Ok(signer.verify(token)?);
                }
                validator
                    .validate(token)
                    .await
                    .map_err(|error| match error {
                        KeystoneError::Refused(reason) => AuthError::KeystoneRefused(reason),
                        KeystoneError::Unavailable(reason) => {
                            AuthError::KeystoneUnavailable(reason)
                        }
                    })
            }
        }
    }

    /// Everything a built-in token says, when it is valid and not revoked.
    pub fn verify_details(&self, token: &str) -> Result<TokenDetails, AuthError> {
        let details = self.signer().verify_details(token)?;
        if let Some(directory) = self.directory()
            && directory.is_revoked(&details)
        {
            return Err(AuthError::Revoked);
        }
        Ok(details)
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use http::HeaderValue;

    use super::*;

    fn signer() -> TokenSigner {
        TokenSigner::new("gateway-test-signing-key-0123456789")
    }

    fn token() -> String {
        signer()
            .issue(
                &Identity::new("alice", "project-a", vec!["member".into()]),
                Duration::from_secs(60),
            )
            .expect("issued")
    }

    #[test]
    fn both_header_styles_are_accepted() {
        let mut openstack = HeaderMap::new();
        openstack.insert(
            AUTH_TOKEN_HEADER,
            HeaderValue::from_str(&token()).expect("header"),
        );
        assert_eq!(
            authenticate(&signer(), &openstack).expect("ok").user_id,
            "alice"
        );

        let mut bearer = HeaderMap::new();
        bearer.insert(
            http::header::AUTHORIZATION,
            HeaderValue::from_str(&format!("Bearer {}", token())).expect("header"),
        );
        assert_eq!(
            authenticate(&signer(), &bearer).expect("ok").project_id,
            "project-a"
        );
    }

    #[test]
    fn missing_and_malformed_credentials_say_what_to_do() {
        assert_eq!(
            authenticate(&signer(), &HeaderMap::new()),
            Err(AuthError::Missing)
        );
        let mut basic = HeaderMap::new();
        basic.insert(
            http::header::AUTHORIZATION,
            HeaderValue::from_static("Basic abc"),
        );
        assert_eq!(authenticate(&signer(), &basic), Err(AuthError::WrongScheme));
        assert!(AuthError::Missing.to_string().contains("ember token issue"));
    }

    #[test]
    fn a_forged_token_is_refused() {
        let forged = TokenSigner::new("some-other-signing-key-9876543210")
            .issue(
                &Identity::new("mallory", "project-a", vec!["admin".into()]),
                Duration::from_secs(60),
            )
            .expect("issued");
        let mut headers = HeaderMap::new();
        headers.insert(
            AUTH_TOKEN_HEADER,
            HeaderValue::from_str(&forged).expect("header"),
        );
        assert_eq!(
            authenticate(&signer(), &headers),
            Err(AuthError::Invalid(TokenError::Forged))
        );
    }
}
