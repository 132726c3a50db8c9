//! The gateway's built-in identity as the Keystone types' backend: its
//! `ember.identity.v1.IdentityAdminService`, called with the internal
//! credential as the stack's owner. The gateway looks the owner's roles in
//! the stack's project up at each call (the roles named in the call are not
//! believed) and lets only an admin through, as Keystone's policy does.
//!
//! The built-in identity has one domain (`default`), gives roles on
//! projects only, and has no project hierarchy or project tags: templates
//! asking for those are refused when validated, by name. A user made
//! without a password gets a random one nobody knows (the built-in
//! identity keeps no password-less users): it cannot log in with a
//! password until one is set, as with Keystone.

use ember_proto::identity::v1 as pb;
use ember_proto::identity::v1::identity_admin_service_client::IdentityAdminServiceClient;
use ember_runtime::Identity;
use ember_runtime::identity::InternalCredential;
use ember_runtime::in_process::Upstream;
use serde_json::{Map, Value, json};
use tonic::Code;

use super::{Acting, Actor, Fields, Grant, IdentityBackend, Kind, Target};
use crate::resources::ResourceFailure;

/// The one domain of the built-in identity, by id and by Keystone's name.
const DOMAIN_ID: &str = "default";
const DOMAIN_NAME: &str = "Default";

/// How long one call may take.
const CALL_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

pub struct BuiltInIdentity {
    upstream: Upstream,
    credential: InternalCredential,
}

impl BuiltInIdentity {
    /// A lazily connected client of the gateway at `url`.
    pub fn connect_lazy(
        url: &str,
        credential: InternalCredential,
    ) -> Result<BuiltInIdentity, String> {
        let upstream = Upstream::to(url, None, crate::peer_endpoint)
            .map_err(|error| format!("engine.identity_url {url:?} is invalid: {error}"))?;
        Ok(BuiltInIdentity {
            upstream,
            credential,
        })
    }

    fn client(&self) -> IdentityAdminServiceClient<Upstream> {
        IdentityAdminServiceClient::new(self.upstream.clone())
    }

    /// `message` as the stack's owner, with the internal credential (and
    /// no roles: the gateway looks them up).
    fn call<T>(&self, acting: &Acting, message: T) -> tonic::Request<T> {
        let mut request = tonic::Request::new(message);
        request.set_timeout(CALL_TIMEOUT);
        Identity::new(
            acting.user_id.clone(),
            acting.project_id.clone(),
            Vec::new(),
        )
        .attach(&self.credential, &mut request);
        request
    }
}

/// The identity's refusal as a resource's failure, in its own words.
fn failure(status: tonic::Status) -> ResourceFailure {
    let message = status.message();
    match status.code() {
        Code::Unavailable | Code::DeadlineExceeded | Code::Unknown => {
            ResourceFailure::new(format!(
                "the built-in identity (the gateway, engine.identity_url) cannot be reached: {message}"
            ))
        }
        _ => ResourceFailure::new(format!("Identity: {message}")),
    }
}

/// `Ok(None)` for NOT_FOUND.
fn found<T>(
    result: Result<tonic::Response<T>, tonic::Status>,
) -> Result<Option<T>, ResourceFailure> {
    match result {
        Ok(answer) => Ok(Some(answer.into_inner())),
        Err(status) if status.code() == Code::NotFound => Ok(None),
        Err(status) => Err(failure(status)),
    }
}

/// `Ok(())` for NOT_FOUND (what is gone is removed).
fn removed<T>(result: Result<tonic::Response<T>, tonic::Status>) -> Result<(), ResourceFailure> {
    found(result).map(drop)
}

fn answered<T>(result: Result<tonic::Response<T>, tonic::Status>) -> Result<T, ResourceFailure> {
    result.map(tonic::Response::into_inner).map_err(failure)
}

/// The objects as Keystone shows them (its field names), so attributes
/// read the same on both identities.
fn project_object(project: pb::Project) -> Value {
    json!({
        "id": project.id,
        "name": project.name,
        "description": project.description,
        "domain_id": project.domain_id,
        "enabled": project.enabled,
        "parent_id": project.domain_id,
        "is_domain": false,
        "tags": [],
    })
}

fn user_object(user: pb::User) -> Value {
    json!({
        "id": user.id,
        "name": user.name,
        "description": user.description,
        "email": user.email,
        "domain_id": user.domain_id,
        "enabled": user.enabled,
        "default_project_id": (!user.default_project_id.is_empty()).then_some(user.default_project_id),
        "password_expires_at": Value::Null,
    })
}

fn role_object(role: pb::Role) -> Value {
    json!({
        "id": role.id,
        "name": role.name,
        "domain_id": Value::Null,
    })
}

fn group_object(group: pb::Group) -> Value {
    json!({
        "id": group.id,
        "name": group.name,
        "description": group.description,
        "domain_id": group.domain_id,
    })
}

/// Whether `domain` names the one domain.
fn is_the_domain(domain: &str) -> bool {
    domain == DOMAIN_ID || domain == DOMAIN_NAME
}

/// A random password nobody knows, for a user made without one.
fn unknowable_password() -> String {
    format!(
        "{}{}",
        uuid::Uuid::new_v4().simple(),
        uuid::Uuid::new_v4().simple()
    )
}

/// A property given as plain text (functions are checked when resolved).
fn literal<'a>(properties: &'a Map<String, Value>, key: &str) -> Option<&'a str> {
    properties.get(key).and_then(Value::as_str)
}

#[tonic::async_trait]
impl IdentityBackend for BuiltInIdentity {
    fn refuse_unhonoured(&self, kind: Kind, properties: &Map<String, Value>) -> Result<(), String> {
        if let Some(domain) = literal(properties, "domain")
            && !is_the_domain(domain)
        {
            return Err(match kind {
                Kind::Role => format!(
                    "domain: the built-in identity has no domain-specific roles (domain {domain:?})"
                ),
                _ => format!(
                    "domain: the built-in identity has one domain, default; {domain:?} is not it"
                ),
            });
        }
        if properties
            .get("parent")
            .is_some_and(|parent| !parent.is_null())
        {
            return Err(
                "parent: the built-in identity has no project hierarchy (use an external Keystone)"
                    .to_owned(),
            );
        }
        if let Some(Value::Array(tags)) = properties.get("tags")
            && !tags.is_empty()
        {
            return Err("tags: the built-in identity keeps no project tags".to_owned());
        }
        if let Some(Value::Array(roles)) = properties.get("roles")
            && let Some(domain) = roles
                .iter()
                .filter_map(|entry| entry.get("domain"))
                .find(|domain| !domain.is_null())
        {
            return Err(format!(
                "roles: the built-in identity gives roles on projects only, not on domain {domain}"
            ));
        }
        Ok(())
    }

    async fn create(
        &self,
        acting: &Acting,
        kind: Kind,
        fields: &Fields,
    ) -> Result<Value, ResourceFailure> {
        let name = fields.name.clone().unwrap_or_default();
        let description = fields.description.clone().unwrap_or_default();
        let mut client = self.client();
        match kind {
            Kind::Project => answered(
                client
                    .create_project(self.call(
                        acting,
                        pb::CreateProjectRequest {
                            name,
                            description,
                            id: String::new(),
                            enabled: fields.enabled,
                        },
                    ))
                    .await,
            )
            .map(project_object),
            Kind::User => answered(
                client
                    .create_user(self.call(
                        acting,
                        pb::CreateUserRequest {
                            name,
                            password: fields.password.clone().unwrap_or_else(unknowable_password),
                            id: String::new(),
                            default_project: fields.default_project.clone().unwrap_or_default(),
                            description,
                            email: fields.email.clone().unwrap_or_default(),
                            enabled: fields.enabled,
                        },
                    ))
                    .await,
            )
            .map(user_object),
            Kind::Role => answered(
                client
                    .create_role(self.call(
                        acting,
                        pb::CreateRoleRequest {
                            name,
                            id: String::new(),
                        },
                    ))
                    .await,
            )
            .map(role_object),
            Kind::Group => answered(
                client
                    .create_group(self.call(
                        acting,
                        pb::CreateGroupRequest {
                            name,
                            description,
                            id: String::new(),
                        },
                    ))
                    .await,
            )
            .map(group_object),
            Kind::Domain => Err(ResourceFailure::new(
                "the built-in identity has one domain and makes no others".to_owned(),
            )),
        }
    }

    async fn update(
        &self,
        acting: &Acting,
        kind: Kind,
        id: &str,
        fields: &Fields,
    ) -> Result<Value, ResourceFailure> {
        let mut client = self.client();
        match kind {
            Kind::Project => answered(
                client
                    .update_project(self.call(
                        acting,
                        pb::UpdateProjectRequest {
                            project: id.to_owned(),
                            name: fields.name.clone(),
                            description: fields.description.clone(),
                            enabled: fields.enabled,
                        },
                    ))
                    .await,
            )
            .map(project_object),
            Kind::User => {
                if let Some(password) = &fields.password {
                    answered(
                        client
                            .set_password(self.call(
                                acting,
                                pb::SetPasswordRequest {
                                    user: id.to_owned(),
                                    password: password.clone(),
                                },
                            ))
                            .await,
                    )?;
                }
                answered(
                    client
                        .update_user(self.call(
                            acting,
                            pb::UpdateUserRequest {
                                user: id.to_owned(),
                                name: fields.name.clone(),
                                description: fields.description.clone(),
                                email: fields.email.clone(),
                                enabled: fields.enabled,
                                default_project: fields.default_project.clone(),
                            },
                        ))
                        .await,
                )
                .map(user_object)
            }
            Kind::Role => answered(
                client
                    .update_role(self.call(
                        acting,
                        pb::UpdateRoleRequest {
                            role: id.to_owned(),
                            name: fields.name.clone().unwrap_or_default(),
                        },
                    ))
                    .await,
            )
            .map(role_object),
            Kind::Group => answered(
                client
                    .update_group(self.call(
                        acting,
                        pb::UpdateGroupRequest {
                            group: id.to_owned(),
                            name: fields.name.clone(),
                            description: fields.description.clone(),
                        },
                    ))
                    .await,
            )
            .map(group_object),
            Kind::Domain => Err(ResourceFailure::new(
                "the built-in identity's domain cannot be changed".to_owned(),
            )),
        }
    }

    async fn show(
        &self,
        acting: &Acting,
        kind: Kind,
        id: &str,
    ) -> Result<Option<Value>, ResourceFailure> {
        let mut client = self.client();
        let id = id.to_owned();
        Ok(match kind {
            Kind::Project => found(
                client
                    .get_project(self.call(acting, pb::GetProjectRequest { project: id }))
                    .await,
            )?
            .map(project_object),
            Kind::User => found(
                client
                    .get_user(self.call(acting, pb::GetUserRequest { user: id }))
                    .await,
            )?
            .map(user_object),
            Kind::Role => found(
                client
                    .get_role(self.call(acting, pb::GetRoleRequest { role: id }))
                    .await,
            )?
            .map(role_object),
            Kind::Group => found(
                client
                    .get_group(self.call(acting, pb::GetGroupRequest { group: id }))
                    .await,
            )?
            .map(group_object),
            Kind::Domain => is_the_domain(&id)
                .then(|| json!({"id": DOMAIN_ID, "name": DOMAIN_NAME, "enabled": true})),
        })
    }

    async fn delete(&self, acting: &Acting, kind: Kind, id: &str) -> Result<(), ResourceFailure> {
        let mut client = self.client();
        let id = id.to_owned();
        match kind {
            Kind::Project => removed(
                client
                    .delete_project(self.call(acting, pb::DeleteProjectRequest { project: id }))
                    .await,
            ),
            Kind::User => removed(
                client
                    .delete_user(self.call(acting, pb::DeleteUserRequest { user: id }))
                    .await,
            ),
            Kind::Role => removed(
                client
                    .delete_role(self.call(acting, pb::DeleteRoleRequest { role: id }))
                    .await,
            ),
            Kind::Group => removed(
                client
                    .delete_group(self.call(acting, pb::DeleteGroupRequest { group: id }))
                    .await,
            ),
            Kind::Domain => Err(ResourceFailure::new(
                "the built-in identity's domain cannot be deleted".to_owned(),
            )),
        }
    }

    async fn find(
        &self,
        acting: &Acting,
        kind: Kind,
        name_or_id: &str,
    ) -> Result<Option<String>, ResourceFailure> {
        Ok(self
            .show(acting, kind, name_or_id)
            .await?
            .map(|object| object["id"].as_str().unwrap_or(name_or_id).to_owned()))
    }

    async fn grant(&self, acting: &Acting, grant: &Grant) -> Result<(), ResourceFailure> {
        let assignment = assignment(grant)?;
        answered(self.client().add_role(self.call(acting, assignment)).await).map(drop)
    }

    async fn revoke(&self, acting: &Acting, grant: &Grant) -> Result<(), ResourceFailure> {
        let Ok(assignment) = assignment(grant) else {
            // A domain's role was never given here.
            return Ok(());
        };
        removed(
            self.client()
                .remove_role(self.call(acting, assignment))
                .await,
        )
    }

    async fn add_member(
        &self,
        acting: &Acting,
        group_id: &str,
        user_id: &str,
    ) -> Result<(), ResourceFailure> {
        answered(
            self.client()
                .add_group_member(self.call(
                    acting,
                    pb::GroupMembership {
                        group: group_id.to_owned(),
                        user: user_id.to_owned(),
                    },
                ))
                .await,
        )
        .map(drop)
    }

    async fn remove_member(
        &self,
        acting: &Acting,
        group_id: &str,
        user_id: &str,
    ) -> Result<(), ResourceFailure> {
        removed(
            self.client()
                .remove_group_member(self.call(
                    acting,
                    pb::GroupMembership {
                        group: group_id.to_owned(),
                        user: user_id.to_owned(),
                    },
                ))
                .await,
        )
    }
}

/// The assignment a grant is; a domain's is refused (validation refuses
/// templates asking for one).
fn assignment(grant: &Grant) -> Result<pb::RoleAssignment, ResourceFailure> {
    let Target::Project(project) = &grant.target else {
        return Err(ResourceFailure::new(
            "roles: the built-in identity gives roles on projects only".to_owned(),
        ));
    };
    let (user, group) = match &grant.actor {
        Actor::User(id) => (id.clone(), String::new()),
        Actor::Group(id) => (String::new(), id.clone()),
    };
    Ok(pb::RoleAssignment {
        user,
        project: project.clone(),
        role: grant.role.clone(),
        group,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(kind: Kind, properties: Value) -> Result<(), String> {
        let identity = BuiltInIdentity::connect_lazy(
            "http://127.0.0.1:9",
            InternalCredential::new("test-credential"),
        )
        .expect("a client");
        identity.refuse_unhonoured(kind, properties.as_object().expect("a map"))
    }

    #[tokio::test]
    async fn what_the_built_in_identity_cannot_honour_is_refused_by_name() {
        assert!(refused(Kind::Project, json!({"domain": "default"})).is_ok());
        assert!(refused(Kind::Project, json!({"domain": "Default", "tags": []})).is_ok());
        assert!(
            refused(Kind::Project, json!({"domain": "other"}))
                .unwrap_err()
                .starts_with("domain: the built-in identity has one domain")
        );
        assert!(
            refused(Kind::Project, json!({"parent": "p"}))
                .unwrap_err()
                .starts_with("parent:")
        );
        assert!(
            refused(Kind::Project, json!({"tags": ["a"]}))
                .unwrap_err()
                .starts_with("tags:")
        );
        assert!(
            refused(Kind::Role, json!({"domain": "other"}))
                .unwrap_err()
                .contains("no domain-specific roles")
        );
        assert!(
            refused(
                Kind::User,
                json!({"roles": [{"role": "member", "domain": "default"}]})
            )
            .unwrap_err()
            .starts_with("roles: the built-in identity gives roles on projects only")
        );
        assert!(
            refused(
                Kind::User,
                json!({"roles": [{"role": "member", "project": "demo"}]})
            )
            .is_ok()
        );
    }
}
