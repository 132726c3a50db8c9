//! The real cloud tests run against (`tests/openstack/cloud.sh` starts it
//! and writes the facts file `EMBER_TEST_OPENSTACK` names): its users,
//! image, flavors and external network, and sessions as each user.
//!
//! Without the cloud a test says so loudly and does nothing — unless
//! `EMBER_TEST_REQUIRE_OPENSTACK=1` (CI's OpenStack step), where the
//! missing cloud fails it.

use std::sync::Arc;
use std::time::Duration;

use serde::Deserialize;

use crate::auth::{Credentials, Domain, Method, Named, Scope, Secret};
use crate::catalog::Interface;
use crate::session::{Cloud, CloudConfig, Session};

/// Names the facts file the cloud's script wrote.
pub const FACTS_VARIABLE: &str = "EMBER_TEST_OPENSTACK";
/// Set to 1 where a missing cloud must fail the tests.
pub const REQUIRE_VARIABLE: &str = "EMBER_TEST_REQUIRE_OPENSTACK";

#[derive(Debug, Clone, Deserialize)]
pub struct Account {
    pub user: String,
    pub password: String,
    pub project: String,
    pub user_id: String,
    pub project_id: String,
}

#[derive(Debug, Clone, Deserialize)]
pub struct NamedId {
    pub name: String,
    pub id: String,
}

#[derive(Debug, Clone, Deserialize)]
pub struct ExternalNetwork {
    pub name: String,
    pub id: String,
    pub subnet_id: String,
}

/// What `tests/openstack/setup_cloud.py` wrote.
#[derive(Debug, Clone, Deserialize)]
pub struct Facts {
    pub auth_url: String,
    pub region: String,
    pub domain: String,
    /// Ember's service user (trustee of the trusts).
    pub service: Account,
    pub admin: Account,
    pub demo: Account,
    /// Another tenant.
    pub alt: Account,
    pub image: NamedId,
    pub flavors: std::collections::BTreeMap<String, String>,
    pub public_network: ExternalNetwork,
    /// Raw image data Glance can download.
    pub image_url: String,
    pub clouds_yaml: String,
}

/// The test cloud.
#[derive(Debug, Clone)]
pub struct TestCloud {
    pub facts: Facts,
    pub cloud: Arc<Cloud>,
}

impl TestCloud {
    /// The cloud, or `None` (said loudly on stderr) when none is
    /// configured and none is required. Panics when one is required and
    /// missing, or when the facts file cannot be read.
    pub fn from_env(test: &str) -> Option<TestCloud> {
        let path = match std::env::var(FACTS_VARIABLE) {
            Ok(path) if !path.is_empty() => path,
            _ => {
                if std::env::var(REQUIRE_VARIABLE).as_deref() == Ok("1") {
                    panic!(
                        "{test}: no OpenStack cloud ({FACTS_VARIABLE} is not set and {REQUIRE_VARIABLE}=1): run `export {FACTS_VARIABLE}=$(tests/openstack/cloud.sh)`"
                    );
                }
                eprintln!(
                    "!!! SKIPPED {test}: no OpenStack cloud; run `export {FACTS_VARIABLE}=$(tests/openstack/cloud.sh)` to run it"
                );
                return None;
            }
        };
        let text = std::fs::read_to_string(&path)
            .unwrap_or_else(|error| panic!("{FACTS_VARIABLE}={path}: {error}"));
        let facts: Facts = serde_json::from_str(&text)
            .unwrap_or_else(|error| panic!("{FACTS_VARIABLE}={path}: {error}"));
        let cloud = Cloud::new(facts.cloud_config())
            .unwrap_or_else(|error| panic!("the test cloud's configuration: {error}"));
        Some(TestCloud { facts, cloud })
    }

    /// A session as `account`, scoped to its project.
    pub fn session(&self, account: &Account) -> Session {
        self.cloud.session(self.facts.password(account))
    }

    /// A session as Ember's service user, scoped to `trust_id`.
    pub fn trust_session(&self, trust_id: &str) -> Session {
        let service = self.facts.password(&self.facts.service);
        self.cloud.session(Credentials {
            method: service.method,
            scope: Scope::Trust(trust_id.to_owned()),
        })
    }
}

impl Facts {
    pub fn cloud_config(&self) -> CloudConfig {
        CloudConfig {
            auth_url: self.auth_url.clone(),
            region: Some(self.region.clone()),
            interface: Interface::Public,
            ca_file: String::new(),
            timeout: Duration::from_secs(60),
        }
    }

    /// `account`'s password credentials, scoped to its project.
    pub fn password(&self, account: &Account) -> Credentials {
        Credentials {
            method: Method::Password {
                user: Named::Name {
                    name: account.user.clone(),
                    domain: Domain::Name(self.domain.clone()),
                },
                password: Secret::new(account.password.clone()),
            },
            scope: Scope::Project(Named::Name {
                name: account.project.clone(),
                domain: Domain::Name(self.domain.clone()),
            }),
        }
    }
}
