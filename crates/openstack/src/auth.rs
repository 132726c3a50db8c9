//! Keystone v3 authentication: what Ember authenticates with (a password,
//! a user's token, or its own password scoped to a trust) and the token
//! Keystone answers with — the user and project behind it, its roles, its
//! expiry and the service catalog.

use chrono::{DateTime, Utc};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::catalog::Catalog;

/// A secret that never shows in logs or `Debug` output.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    pub fn new(text: impl Into<String>) -> Secret {
        Secret(text.into())
    }

    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(…)")
    }
}

/// A user or project named by id, or by name within a domain.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Named {
    Id(String),
    Name { name: String, domain: Domain },
}

/// A domain by id or by name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Domain {
    Id(String),
    Name(String),
}

impl Domain {
    fn body(&self) -> Value {
        match self {
            Domain::Id(id) => json!({ "id": id }),
            Domain::Name(name) => json!({ "name": name }),
        }
    }
}

impl Named {
    fn body(&self) -> Value {
        match self {
            Named::Id(id) => json!({ "id": id }),
            Named::Name { name, domain } => json!({ "name": name, "domain": domain.body() }),
        }
    }
}

/// What the token is scoped to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Scope {
    Project(Named),
    /// A trust: the token acts for the trustor, in the trust's project,
    /// with the trust's roles.
    Trust(String),
    /// Whatever Keystone gives by default (a user's default project).
    Unscoped,
}

/// How Ember proves who it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Method {
    Password {
        user: Named,
        password: Secret,
    },
    /// A token Keystone issued (a user's): rescoped or renewed with the
    /// `token` method.
    Token(Secret),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Credentials {
    pub method: Method,
    pub scope: Scope,
}

impl Credentials {
    /// The body of `POST /v3/auth/tokens`.
    pub(crate) fn body(&self) -> Value {
        let identity = match &self.method {
            Method::Password { user, password } => {
                let mut user = user.body();
                user["password"] = json!(password.expose());
                json!({ "methods": ["password"], "password": { "user": user } })
            }
            Method::Token(token) => {
                json!({ "methods": ["token"], "token": { "id": token.expose() } })
            }
        };
        let mut auth = json!({ "identity": identity });
        match &self.scope {
            Scope::Project(project) => auth["scope"] = json!({ "project": project.body() }),
            Scope::Trust(trust_id) => {
                auth["scope"] = json!({ "OS-TRUST:trust": { "id": trust_id } })
            }
            Scope::Unscoped => {}
        }
        json!({ "auth": auth })
    }
}

/// A role held through a token.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Role {
    pub id: String,
    pub name: String,
}

/// A token and what Keystone said about it.
#[derive(Debug, Clone)]
pub struct Token {
    pub value: Secret,
    pub expires_at: DateTime<Utc>,
    pub user_id: String,
    pub user_name: String,
    /// The project it is scoped to (a trust's project for a trust).
    pub project_id: Option<String>,
    pub roles: Vec<Role>,
    pub catalog: Catalog,
    /// The trust it was scoped with.
    pub trust_id: Option<String>,
}

#[derive(Deserialize)]
struct TokenAnswer {
    token: TokenBody,
}

#[derive(Deserialize)]
struct TokenBody {
    expires_at: String,
    user: IdName,
    #[serde(default)]
    project: Option<IdName>,
    #[serde(default)]
    roles: Vec<Role>,
    #[serde(default)]
    catalog: Catalog,
    #[serde(default, rename = "OS-TRUST:trust")]
    trust: Option<TrustRef>,
}

#[derive(Deserialize)]
struct IdName {
    id: String,
    #[serde(default)]
    name: String,
}

#[derive(Deserialize)]
struct TrustRef {
    id: String,
}

impl Token {
    /// Reads Keystone's answer: the token's value comes from the
    /// `X-Subject-Token` header, the rest from the body.
    pub(crate) fn from_answer(value: String, body: &[u8]) -> Result<Token, String> {
        let answer: TokenAnswer = serde_json::from_slice(body)
            .map_err(|error| format!("the token answer is not Keystone's: {error}"))?;
        let body = answer.token;
        let expires_at = DateTime::parse_from_rfc3339(&body.expires_at)
            .map_err(|error| format!("expires_at {:?}: {error}", body.expires_at))?
            .with_timezone(&Utc);
        Ok(Token {
            value: Secret::new(value),
            expires_at,
            user_id: body.user.id,
            user_name: body.user.name,
            project_id: body.project.map(|project| project.id),
            roles: body.roles,
            catalog: body.catalog,
            trust_id: body.trust.map(|trust| trust.id),
        })
    }

    pub fn role_names(&self) -> impl Iterator<Item = &str> {
        self.roles.iter().map(|role| role.name.as_str())
    }
}

/// The URL tokens are asked for, from an auth URL with or without `/v3`.
pub fn tokens_url(auth_url: &str) -> String {
    format!("{}/auth/tokens", v3_url(auth_url))
}

/// Keystone's v3 base URL, from an auth URL with or without `/v3`.
pub fn v3_url(auth_url: &str) -> String {
    let base = auth_url.trim_end_matches('/');
    if base.ends_with("/v3") {
        base.to_owned()
    } else {
        format!("{base}/v3")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bodies_name_users_projects_and_trusts_as_keystone_reads_them() {
        let password = Credentials {
            method: Method::Password {
                user: Named::Name {
                    name: "ember".to_owned(),
                    domain: Domain::Name("Default".to_owned()),
                },
                password: Secret::new("pw"),
            },
            scope: Scope::Project(Named::Name {
                name: "service".to_owned(),
                domain: Domain::Id("default".to_owned()),
            }),
        };
        assert_eq!(
            password.body(),
            json!({"auth": {
                "identity": {"methods": ["password"], "password": {"user": {
                    "name": "ember", "domain": {"name": "Default"}, "password": "pw"}}},
                "scope": {"project": {"name": "service", "domain": {"id": "default"}}}
            }})
        );
        let trust = Credentials {
            method: password.method.clone(),
            scope: Scope::Trust("t1".to_owned()),
        };
        assert_eq!(
            trust.body()["auth"]["scope"],
            json!({"OS-TRUST:trust": {"id": "t1"}})
        );
        let token = Credentials {
            method: Method::Token(Secret::new("tok")),
            scope: Scope::Unscoped,
        };
        assert_eq!(
            token.body(),
            json!({"auth": {"identity": {"methods": ["token"], "token": {"id": "tok"}}}})
        );
        assert!(
            !format!("{password:?}").contains("pw"),
            "secrets stay hidden"
        );
    }

    #[test]
    fn a_token_answer_gives_user_project_roles_expiry_and_trust() {
        let body = json!({"token": {
            "methods": ["password"],
            "user": {"id": "u1", "name": "demo", "domain": {"id": "default", "name": "Default"}},
            "project": {"id": "p1", "name": "demo", "domain": {"id": "default", "name": "Default"}},
            "roles": [{"id": "r1", "name": "member"}, {"id": "r2", "name": "reader"}],
            "expires_at": "2026-11-28T10:40:40.000000Z",
            "issued_at": "2026-11-28T09:40:40.000000Z",
            "catalog": [],
            "OS-TRUST:trust": {"id": "t1", "impersonation": true}
        }});
        let token =
            Token::from_answer("gAAAA".to_owned(), body.to_string().as_bytes()).expect("a token");
        assert_eq!(token.value.expose(), "gAAAA");
        assert_eq!(token.user_id, "u1");
        assert_eq!(token.project_id.as_deref(), Some("p1"));
        assert_eq!(token.role_names().collect::<Vec<_>>(), ["member", "reader"]);
        assert_eq!(token.trust_id.as_deref(), Some("t1"));
        assert_eq!(
            token.expires_at.to_rfc3339(),
            "2026-11-28T10:40:40+00:00".to_owned()
        );
        assert!(Token::from_answer("x".to_owned(), b"{}").is_err());
    }

    #[test]
    fn auth_urls_work_with_or_without_the_version() {
        for url in [
            "http://k:5000",
            "http://k:5000/",
            "http://k:5000/v3",
            "http://k:5000/v3/",
        ] {
            assert_eq!(tokens_url(url), "http://k:5000/v3/auth/tokens");
        }
        assert_eq!(
            tokens_url("https://cloud/identity"),
            "https://cloud/identity/v3/auth/tokens"
        );
    }
}
