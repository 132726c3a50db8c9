//! Authentication at the door: every request except health, metrics and
//! reflection must carry a token, as `X-Auth-Token` (OpenStack clients) or
//! `Authorization: Bearer` (gRPC, curl). The verified identity is what the
//! internal services see; anything the caller sent in identity headers is
//! discarded.

use http::HeaderMap;

use ember_runtime::Identity;
use ember_runtime::auth::{TokenError, TokenSigner};

pub const AUTH_TOKEN_HEADER: &str = "x-auth-token";

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum AuthError {
    #[error(
        "authentication required: send a token as X-Auth-Token or Authorization: Bearer (mint one with `ember token issue`)"
    )]
    Missing,
    #[error("authorization header must be `Bearer <token>`")]
    WrongScheme,
    #[error("{0}")]
    Invalid(#[from] TokenError),
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

pub fn authenticate(signer: &TokenSigner, headers: &HeaderMap) -> Result<Identity, AuthError> {
    let token = token_of(headers)?;
    if token.is_empty() {
        return Err(AuthError::Missing);
    }
    Ok(signer.verify(token)?)
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
