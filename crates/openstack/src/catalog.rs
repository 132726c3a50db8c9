//! The service catalog a Keystone token carries: where each service
//! answers, by interface and region. Ember never configures a service's
//! URL by hand; it asks the catalog, as keystoneauth does.

use serde::Deserialize;

use crate::error::{Error, Result, Service};

/// Which of a service's endpoints to call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Interface {
    #[default]
    Public,
    Internal,
    Admin,
}

impl Interface {
    pub fn as_str(self) -> &'static str {
        match self {
            Interface::Public => "public",
            Interface::Internal => "internal",
            Interface::Admin => "admin",
        }
    }

    pub fn parse(text: &str) -> Option<Interface> {
        match text {
            "public" | "publicURL" => Some(Interface::Public),
            "internal" | "internalURL" => Some(Interface::Internal),
            "admin" | "adminURL" => Some(Interface::Admin),
            _ => None,
        }
    }
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
pub struct Catalog(pub Vec<CatalogEntry>);

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct CatalogEntry {
    #[serde(rename = "type")]
    pub service_type: String,
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub endpoints: Vec<Endpoint>,
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Endpoint {
    pub interface: String,
    #[serde(default)]
    pub region_id: Option<String>,
    #[serde(default)]
    pub region: Option<String>,
    pub url: String,
}

impl Endpoint {
    fn region(&self) -> Option<&str> {
        self.region_id.as_deref().or(self.region.as_deref())
    }
}

impl Catalog {
    /// The URL of `service` at `interface`, in `region` when one is given
    /// (else the first region offering it), without a trailing slash.
    pub fn endpoint(
        &self,
        service: Service,
        interface: Interface,
        region: Option<&str>,
    ) -> Result<String> {
        service
            .catalog_types()
            .iter()
            .find_map(|service_type| {
                self.0
                    .iter()
                    .filter(|entry| entry.service_type == *service_type)
                    .flat_map(|entry| &entry.endpoints)
                    .find(|endpoint| {
                        Interface::parse(&endpoint.interface) == Some(interface)
                            && region.is_none_or(|region| endpoint.region() == Some(region))
                    })
            })
            .map(|endpoint| endpoint.url.trim_end_matches('/').to_owned())
            .ok_or_else(|| Error::NoEndpoint {
                service,
                interface: interface.as_str().to_owned(),
                region: region.map(str::to_owned),
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn catalog() -> Catalog {
        serde_json::from_value(serde_json::json!([
            {"type": "compute", "name": "nova", "endpoints": [
                {"interface": "public", "region_id": "RegionOne", "region": "RegionOne", "url": "http://one/v2.1/"},
                {"interface": "internal", "region_id": "RegionOne", "url": "http://one-internal/v2.1"},
                {"interface": "public", "region_id": "RegionTwo", "url": "http://two/v2.1"}
            ]},
            {"type": "volumev3", "name": "cinderv3", "endpoints": [
                {"interface": "public", "region": "RegionOne", "url": "http://cinder/v3/abc"}
            ]}
        ]))
        .expect("a catalog")
    }

    #[test]
    fn endpoints_are_chosen_by_interface_and_region() {
        let catalog = catalog();
        assert_eq!(
            catalog
                .endpoint(Service::Compute, Interface::Public, Some("RegionOne"))
                .expect("found"),
            "http://one/v2.1"
        );
        assert_eq!(
            catalog
                .endpoint(Service::Compute, Interface::Public, Some("RegionTwo"))
                .expect("found"),
            "http://two/v2.1"
        );
        assert_eq!(
            catalog
                .endpoint(Service::Compute, Interface::Internal, None)
                .expect("found"),
            "http://one-internal/v2.1"
        );
        // Block storage under one of its older names.
        assert_eq!(
            catalog
                .endpoint(Service::BlockStorage, Interface::Public, Some("RegionOne"))
                .expect("found"),
            "http://cinder/v3/abc"
        );
    }

    #[test]
    fn a_missing_service_names_what_was_looked_for() {
        let missing = catalog()
            .endpoint(Service::Network, Interface::Admin, Some("RegionOne"))
            .expect_err("no network");
        assert_eq!(
            missing.to_string(),
            "the cloud's catalog has no admin endpoint for Neutron (network) in region \"RegionOne\""
        );
        assert!(
            catalog()
                .endpoint(Service::Compute, Interface::Admin, Some("RegionTwo"))
                .is_err()
        );
    }
}
