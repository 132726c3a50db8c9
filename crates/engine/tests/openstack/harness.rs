//! What the resource tests share: the cloud, a trust from `demo` to
//! Ember's service user (as a stack created by demo would have), the
//! openstack types registered on it, and requests as the executor makes
//! them.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use ember_engine::cloud::{OpenStackCloud, OpenStackConfig, ServiceAccount};
use ember_engine::domain::delegation::{Delegation, DelegationOwner, TrustOwnership};
use ember_engine::domain::{ActionStatus, Resource, StackAction};
use ember_engine::resources::{
    ResourceOutcome, ResourceRequest, ResourceType, ResourceTypeRegistry, validate_properties,
};
use ember_engine::store::delegations::DelegationStore;
use ember_openstack::Session;
use ember_openstack::keystone::{Keystone, NewTrust};
use ember_openstack::testing::{Account, TestCloud};
use serde_json::{Map, Value};
use uuid::Uuid;

/// Delegations kept in memory: every stack of the test acts through the
/// delegation its root was given.
#[derive(Default)]
pub struct Delegations {
    rows: Mutex<HashMap<(String, Uuid), Delegation>>,
}

#[async_trait]
impl DelegationStore for Delegations {
    async fn record_delegation(
        &self,
        owner: DelegationOwner,
        delegation: &Delegation,
        _ownership: TrustOwnership,
    ) -> ember_engine::Result<()> {
        self.rows
            .lock()
            .expect("rows")
            .insert((owner.kind().to_owned(), owner.id()), delegation.clone());
        Ok(())
    }

    async fn delegation_of(
        &self,
        owner: DelegationOwner,
    ) -> ember_engine::Result<Option<Delegation>> {
        Ok(self
            .rows
            .lock()
            .expect("rows")
            .get(&(owner.kind().to_owned(), owner.id()))
            .cloned())
    }

    async fn delegation_of_stack(
        &self,
        stack_id: Uuid,
    ) -> ember_engine::Result<Option<Delegation>> {
        self.delegation_of(DelegationOwner::Stack(stack_id)).await
    }

    async fn owns_trust(&self, owner: DelegationOwner) -> ember_engine::Result<bool> {
        Ok(self.delegation_of(owner).await?.is_some())
    }

    async fn forget_delegation(&self, owner: DelegationOwner) -> ember_engine::Result<bool> {
        Ok(self
            .rows
            .lock()
            .expect("rows")
            .remove(&(owner.kind().to_owned(), owner.id()))
            .is_some())
    }
}

pub struct Harness {
    pub test_cloud: TestCloud,
    pub cloud: Arc<OpenStackCloud>,
    pub registry: ResourceTypeRegistry,
    pub delegations: Arc<Delegations>,
    /// The stack the resources belong to (demo's, with demo's trust).
    pub stack_id: Uuid,
    pub trust_id: String,
}

impl Harness {
    /// The cloud and a stack of demo's with its trust; `None` (said
    /// loudly) without a cloud.
    pub async fn start(test: &str) -> Option<Harness> {
        let test_cloud = TestCloud::from_env(test)?;
        let facts = &test_cloud.facts;
        let delegations = Arc::new(Delegations::default());
        let cloud = OpenStackCloud::new(
            &OpenStackConfig {
                cloud: facts.cloud_config(),
                account: ServiceAccount {
                    user: facts.service.user.clone(),
                    password: facts.service.password.clone(),
                    user_domain: facts.domain.clone(),
                    project: facts.service.project.clone(),
                    project_domain: facts.domain.clone(),
                },
            },
            delegations.clone(),
        )
        .expect("the cloud's configuration");
        let stack_id = Uuid::now_v7();
        let trust_id = Harness::trust(&test_cloud, &facts.demo).await;
        delegations
            .record_delegation(
                DelegationOwner::Stack(stack_id),
                &Delegation {
                    trust_id: trust_id.clone(),
                    trustor_user_id: facts.demo.user_id.clone(),
                    project_id: facts.demo.project_id.clone(),
                },
                TrustOwnership::Borrows,
            )
            .await
            .expect("recorded");
        let registry = ResourceTypeRegistry::builtin().with_cloud(&cloud);
        Some(Harness {
            test_cloud,
            cloud,
            registry,
            delegations,
            stack_id,
            trust_id,
        })
    }

    /// A trust from `account` to Ember's service user, with all its roles.
    pub async fn trust(test_cloud: &TestCloud, account: &Account) -> String {
        let session = test_cloud.session(account);
        let token = session.token().await.expect("the trustor authenticates");
        Keystone::new(&session)
            .create_trust(&NewTrust {
                trustor_user_id: token.user_id.clone(),
                trustee_user_id: test_cloud.facts.service.user_id.clone(),
                project_id: account.project_id.clone(),
                role_names: token.role_names().map(str::to_owned).collect(),
                impersonation: true,
                expires_at: None,
            })
            .await
            .expect("a trust")
            .id
    }

    /// demo's own session (to look at what the resources made).
    pub fn demo(&self) -> Session {
        self.test_cloud.session(&self.test_cloud.facts.demo)
    }

    /// alt's session: another project.
    pub fn alt(&self) -> Session {
        self.test_cloud.session(&self.test_cloud.facts.alt)
    }

    pub fn resource_type(&self, type_name: &str) -> &Arc<dyn ResourceType> {
        self.registry
            .get(type_name)
            .unwrap_or_else(|| panic!("{type_name} is registered on the openstack backend"))
    }

    /// A request for `name` of `type_name` in the harness's stack, its
    /// properties validated (defaults applied) as the executor does.
    pub fn request(&self, type_name: &str, name: &str, properties: Value) -> ResourceRequest {
        self.request_in(self.stack_id, Uuid::now_v7(), type_name, name, properties)
    }

    /// The same for a given row (`resource_id`): a create run again.
    pub fn request_in(
        &self,
        stack_id: Uuid,
        resource_id: Uuid,
        type_name: &str,
        name: &str,
        properties: Value,
    ) -> ResourceRequest {
        let resolved: Map<String, Value> = validate_properties(
            self.resource_type(type_name).schema(),
            &properties,
            &format!("resources.{name}.properties"),
        )
        .unwrap_or_else(|error| panic!("{type_name} {name}: {error}"));
        let facts = &self.test_cloud.facts;
        ResourceRequest {
            stack_id,
            stack_name: "ostest".to_owned(),
            project_id: facts.demo.project_id.clone(),
            user_id: facts.demo.user_id.clone(),
            nested_depth: 0,
            type_name: type_name.to_owned(),
            resource_name: name.to_owned(),
            resource_id,
            properties: resolved,
        }
    }

    /// The row a create's `outcome` leaves for `request` (as the executor
    /// records it), CREATE_COMPLETE.
    pub fn created(&self, request: &ResourceRequest, outcome: &ResourceOutcome) -> Resource {
        let now = chrono::Utc::now();
        Resource {
            id: request.resource_id,
            stack_id: request.stack_id,
            name: request.resource_name.clone(),
            type_name: request.type_name.clone(),
            physical_id: Some(outcome.physical_id.clone()),
            action: StackAction::Create,
            status: ActionStatus::Complete,
            status_reason: String::new(),
            properties: Value::Object(request.properties.clone()),
            attributes: Value::Object(outcome.attributes.clone()),
            metadata: Value::Object(Map::new()),
            data: outcome.data.clone(),
            created_at: now,
            updated_at: now,
        }
    }

    /// Creates `name` of `type_name` and returns its row.
    pub async fn create(&self, type_name: &str, name: &str, properties: Value) -> Resource {
        let request = self.request(type_name, name, properties);
        let outcome = self
            .resource_type(type_name)
            .create(&request)
            .await
            .unwrap_or_else(|failure| panic!("{type_name} {name}: {failure}"));
        self.created(&request, &outcome)
    }

    /// Deletes `resource` (its type's delete).
    pub async fn delete(&self, resource: &Resource) {
        self.resource_type(&resource.type_name)
            .delete(resource)
            .await
            .unwrap_or_else(|failure| panic!("delete {}: {failure}", resource.name));
    }
}

impl Drop for Harness {
    fn drop(&mut self) {
        // The trust is demo's: deleted by demo, best effort (a test that
        // panicked leaves it, and its objects, for the cloud's next wipe).
        let session = self.demo();
        let trust_id = self.trust_id.clone();
        if let Ok(handle) = tokio::runtime::Handle::try_current() {
            handle.spawn(async move {
                let _ = tokio::time::timeout(
                    Duration::from_secs(10),
                    Keystone::new(&session).delete_trust(&trust_id),
                )
                .await;
            });
        }
    }
}

/// A short unique name.
pub fn unique(prefix: &str) -> String {
    format!("{prefix}-{}", &Uuid::new_v4().simple().to_string()[..8])
}
