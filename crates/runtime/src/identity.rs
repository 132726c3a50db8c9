//! Who is calling, and how that travels between services.
//!
//! The gateway authenticates the caller and forwards the identity in gRPC
//! metadata together with the internal service credential. Internal services
//! accept an identity only from a caller that presents that credential, so a
//! client that reaches an internal port directly cannot claim to be anyone.

use std::sync::Arc;

use http::{HeaderMap, HeaderValue};
use serde::{Deserialize, Serialize};
use tonic::metadata::{AsciiMetadataValue, MetadataMap};

pub const USER_ID_HEADER: &str = "x-ember-user-id";
pub const PROJECT_ID_HEADER: &str = "x-ember-project-id";
pub const ROLES_HEADER: &str = "x-ember-roles";
pub const INTERNAL_CREDENTIAL_HEADER: &str = "x-ember-internal-credential";
pub const REQUEST_ID_HEADER: &str = "x-request-id";
/// The caller's own Keystone token, forwarded by a gateway that validates
/// tokens against Keystone (`auth.mode = "keystone"`): what the engine
/// needs to make a trust for work that runs after the request (only the
/// trustor may delegate). Never sent with Ember's own tokens.
pub const SUBJECT_TOKEN_HEADER: &str = "x-ember-subject-token";

/// The role that may act on every project's objects and lift admin locks.
pub const ADMIN_ROLE: &str = "admin";
/// The role that may change its project's objects (Keystone's default
/// roles nest: reader ⊂ member ⊂ admin).
pub const MEMBER_ROLE: &str = "member";
/// The role that may look but never change.
pub const READER_ROLE: &str = "reader";

/// An authenticated caller.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Identity {
    pub user_id: String,
    pub project_id: String,
    pub roles: Vec<String>,
}

impl Identity {
    pub fn new(
        user_id: impl Into<String>,
        project_id: impl Into<String>,
        roles: Vec<String>,
    ) -> Self {
        Identity {
            user_id: user_id.into(),
            project_id: project_id.into(),
            roles,
        }
    }

    pub fn is_admin(&self) -> bool {
        self.roles.iter().any(|role| role == ADMIN_ROLE)
    }

    /// Ember's one rule of roles: a caller holding `reader` but neither
    /// `member` nor `admin` may read and never change anything (Heat's
    /// default policies: `PROJECT_READER` reads, `PROJECT_MEMBER` writes).
    /// A token without `reader` is judged by its other roles, as before
    /// roles were checked (Keystone gives no project-scoped token without a
    /// role, and deployments still using `_member_` keep working).
    pub fn is_read_only(&self) -> bool {
        self.roles.iter().any(|role| role == READER_ROLE)
            && !self
                .roles
                .iter()
                .any(|role| role == MEMBER_ROLE || role == ADMIN_ROLE)
    }

    /// Checks that every part can travel in a header and is a sensible name:
    /// 1-64 characters of letters, digits and `._@-`.
    pub fn validate(&self) -> Result<(), String> {
        validate_name("user", &self.user_id)?;
        validate_name("project", &self.project_id)?;
        for role in &self.roles {
            validate_name("role", role)?;
        }
        Ok(())
    }

    /// Writes the identity and the internal credential into HTTP headers,
    /// replacing whatever the original caller sent under those names.
    pub fn write_headers(&self, credential: &InternalCredential, headers: &mut HeaderMap) {
        strip_identity_headers(headers);
        let pairs = [
            (USER_ID_HEADER, self.user_id.clone()),
            (PROJECT_ID_HEADER, self.project_id.clone()),
            (ROLES_HEADER, self.roles.join(",")),
            (INTERNAL_CREDENTIAL_HEADER, credential.secret.to_string()),
        ];
        for (name, value) in pairs {
            // Identities are validated when tokens are issued and verified,
            // so these are visible ASCII; a value that is not is left out and
            // the internal service then rejects the call as unauthenticated.
            if let Ok(value) = HeaderValue::from_str(&value) {
                headers.insert(name, value);
            }
        }
    }

    /// The same as [`Identity::write_headers`] for a typed tonic request.
    pub fn attach<T>(&self, credential: &InternalCredential, request: &mut tonic::Request<T>) {
        let mut headers = std::mem::take(request.metadata_mut()).into_headers();
        self.write_headers(credential, &mut headers);
        *request.metadata_mut() = MetadataMap::from_headers(headers);
    }

    /// The identity an internal service's interceptor placed on the request.
    pub fn of<T>(request: &tonic::Request<T>) -> Result<&Identity, tonic::Status> {
        request
            .extensions()
            .get::<Identity>()
            .ok_or_else(|| tonic::Status::unauthenticated("the request carries no caller identity"))
    }

    fn from_metadata(metadata: &MetadataMap) -> Result<Identity, String> {
        Identity::from_headers(metadata.as_ref())
    }

    /// The identity the headers name, unchecked: whether the call also
    /// carries the internal credential is the interceptor's to decide.
    pub fn from_headers(headers: &HeaderMap) -> Result<Identity, String> {
        let read = |name: &str| -> Result<String, String> {
            headers
                .get(name)
                .and_then(|value| value.to_str().ok())
                .map(str::to_owned)
                .ok_or_else(|| format!("metadata {name} is missing"))
        };
        let roles = read(ROLES_HEADER)?;
        let identity = Identity {
            user_id: read(USER_ID_HEADER)?,
            project_id: read(PROJECT_ID_HEADER)?,
            roles: roles
                .split(',')
                .filter(|role| !role.is_empty())
                .map(str::to_owned)
                .collect(),
        };
        identity.validate()?;
        Ok(identity)
    }
}

fn validate_name(what: &str, value: &str) -> Result<(), String> {
    if value.is_empty() || value.len() > 64 {
        return Err(format!(
            "{what} must be 1-64 characters, got {}",
            value.len()
        ));
    }
    if let Some(bad) = value
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '@' | '-')))
    {
        return Err(format!(
            "{what} {value:?} contains {bad:?}: use letters, digits and ._@-"
        ));
    }
    Ok(())
}

/// Removes every identity header, so a caller cannot smuggle one through.
pub fn strip_identity_headers(headers: &mut HeaderMap) {
    for name in [
        USER_ID_HEADER,
        PROJECT_ID_HEADER,
        ROLES_HEADER,
        INTERNAL_CREDENTIAL_HEADER,
        SUBJECT_TOKEN_HEADER,
    ] {
        headers.remove(name);
    }
}

/// The caller's Keystone token, as an internal service received it (see
/// [`SUBJECT_TOKEN_HEADER`]); never shown in logs.
#[derive(Clone, PartialEq, Eq)]
pub struct SubjectToken(Arc<str>);

impl std::fmt::Debug for SubjectToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SubjectToken(…)")
    }
}

impl SubjectToken {
    pub fn new(token: &str) -> SubjectToken {
        SubjectToken(Arc::from(token))
    }

    pub fn expose(&self) -> &str {
        &self.0
    }

    /// The token the request carried, if its caller was a Keystone user.
    pub fn of<T>(request: &tonic::Request<T>) -> Option<&SubjectToken> {
        request.extensions().get::<SubjectToken>()
    }

    /// Adds the token to `headers` (after [`Identity::write_headers`]).
    pub fn write_header(&self, headers: &mut HeaderMap) {
        if let Ok(value) = HeaderValue::from_str(&self.0) {
            headers.insert(SUBJECT_TOKEN_HEADER, value);
        }
    }

    /// The same as [`SubjectToken::write_header`] for a typed tonic request.
    pub fn attach<T>(&self, request: &mut tonic::Request<T>) {
        if let Ok(value) = AsciiMetadataValue::try_from(self.0.as_ref()) {
            request.metadata_mut().insert(SUBJECT_TOKEN_HEADER, value);
        }
    }
}

/// The shared secret that proves a call comes from another Ember service.
#[derive(Clone)]
pub struct InternalCredential {
    secret: Arc<str>,
}

impl std::fmt::Debug for InternalCredential {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("InternalCredential(..)")
    }
}

impl InternalCredential {
    pub fn new(secret: &str) -> Self {
        InternalCredential {
            secret: Arc::from(secret),
        }
    }

    fn matches(&self, presented: &[u8]) -> bool {
        constant_time_eq(self.secret.as_bytes(), presented)
    }
}

/// Compares secrets in time independent of where they differ (a token,
/// a credential): the length is not secret, the bytes are.
pub fn constant_time_eq(left: &[u8], right: &[u8]) -> bool {
    if left.len() != right.len() {
        return false;
    }
    left.iter()
        .zip(right)
        .fold(0u8, |difference, (a, b)| difference | (a ^ b))
        == 0
}

/// Interceptor for internal services: rejects calls without the internal
/// credential and puts the forwarded [`Identity`] into the request extensions.
#[derive(Clone, Debug)]
pub struct InternalAuth {
    credential: InternalCredential,
}

impl InternalAuth {
    pub fn new(credential: InternalCredential) -> Self {
        InternalAuth { credential }
    }
}

impl tonic::service::Interceptor for InternalAuth {
    fn call(
        &mut self,
        mut request: tonic::Request<()>,
    ) -> Result<tonic::Request<()>, tonic::Status> {
        let presented = request
            .metadata()
            .get(INTERNAL_CREDENTIAL_HEADER)
            .map(AsciiMetadataValue::as_encoded_bytes);
        match presented {
            Some(bytes) if self.credential.matches(bytes) => {}
            Some(_) => {
                return Err(tonic::Status::unauthenticated(
                    "internal service credential is wrong: call through the api-gateway",
                ));
            }
            None => {
                return Err(tonic::Status::unauthenticated(
                    "internal service credential is missing: call through the api-gateway",
                ));
            }
        }
        let identity = Identity::from_metadata(request.metadata()).map_err(|reason| {
            tonic::Status::unauthenticated(format!("caller identity: {reason}"))
        })?;
        let subject_token = request
            .metadata()
            .get(SUBJECT_TOKEN_HEADER)
            .and_then(|value| value.to_str().ok())
            .map(SubjectToken::new);
        if let Some(token) = subject_token {
            request.extensions_mut().insert(token);
        }
        request.extensions_mut().insert(identity);
        Ok(request)
    }
}

#[cfg(test)]
mod tests {
    use tonic::service::Interceptor;

    use super::*;

    fn member() -> Identity {
        Identity::new("alice", "project-a", vec!["member".into()])
    }

    #[test]
    fn forwarded_identity_is_accepted_with_the_credential() {
        let credential = InternalCredential::new("s3cret-credential");
        let mut request = tonic::Request::new(());
        member().attach(&credential, &mut request);
        let request = InternalAuth::new(credential)
            .call(request)
            .expect("accepted");
        assert_eq!(Identity::of(&request).expect("identity"), &member());
    }

    #[test]
    fn a_call_without_the_credential_is_rejected() {
        let mut request = tonic::Request::new(());
        request
            .metadata_mut()
            .insert(USER_ID_HEADER, AsciiMetadataValue::from_static("mallory"));
        let error = InternalAuth::new(InternalCredential::new("s3cret-credential"))
            .call(request)
            .expect_err("rejected");
        assert_eq!(error.code(), tonic::Code::Unauthenticated);
        assert!(
            error.message().contains("credential is missing"),
            "{}",
            error.message()
        );
    }

    #[test]
    fn a_wrong_credential_is_rejected() {
        let mut request = tonic::Request::new(());
        member().attach(&InternalCredential::new("guess"), &mut request);
        let error = InternalAuth::new(InternalCredential::new("s3cret-credential"))
            .call(request)
            .expect_err("rejected");
        assert!(
            error.message().contains("credential is wrong"),
            "{}",
            error.message()
        );
    }

    #[test]
    fn identity_names_are_validated() {
        assert!(member().validate().is_ok());
        let bad = Identity::new("al ice", "p", vec![]);
        assert!(bad.validate().unwrap_err().contains("' '"));
        let empty = Identity::new("", "p", vec![]);
        assert!(empty.validate().unwrap_err().contains("1-64"));
    }

    #[test]
    fn admin_role_is_recognised() {
        assert!(!member().is_admin());
        assert!(Identity::new("root", "ops", vec!["member".into(), "admin".into()]).is_admin());
    }
}
