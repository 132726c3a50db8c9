//! Where a cloud places an instance's machine and what it plugs into it:
//! networks (by network, port, subnet or fixed IP), security groups, a key
//! pair, volumes to boot from, scheduler hints, an availability zone —
//! what `OS::Nova::Server` says beyond image and flavor. Only a driver that
//! places machines on a cloud (openstack: Nova) honours it; the others
//! refuse a placement they cannot honour, naming what they cannot, rather
//! than ignore it.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::error::{Error, Result};

/// The most interfaces, security groups and block devices one machine
/// asks for (Nova's own limits are lower).
pub const MAX_PLACEMENT_ITEMS: usize = 64;

/// One interface of the machine: on a network (by name or id), an
/// existing port, a subnet, or a fixed IP on a network.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NetworkRequest {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subnet: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fixed_ip: Option<String>,
    /// Nova's device tag for the interface.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tag: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Placement {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub networks: Vec<NetworkRequest>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub security_groups: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub availability_zone: Option<String>,
    /// `block_device_mapping_v2` entries, in Nova's form.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub block_device_mapping: Vec<Value>,
    #[serde(default, skip_serializing_if = "Map::is_empty")]
    pub scheduler_hints: Map<String, Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config_drive: Option<bool>,
}

impl Placement {
    pub fn is_empty(&self) -> bool {
        *self == Placement::default()
    }

    /// The properties given, by their template names, for a driver that
    /// must refuse them.
    pub fn given(&self) -> Vec<&'static str> {
        let mut given = Vec::new();
        if !self.networks.is_empty() {
            given.push("networks");
        }
        if !self.security_groups.is_empty() {
            given.push("security_groups");
        }
        if self.key_name.is_some() {
            given.push("key_name");
        }
        if self.availability_zone.is_some() {
            given.push("availability_zone");
        }
        if !self.block_device_mapping.is_empty() {
            given.push("block_device_mapping_v2");
        }
        if !self.scheduler_hints.is_empty() {
            given.push("scheduler_hints");
        }
        if self.config_drive.is_some() {
            given.push("config_drive");
        }
        given
    }

    /// Checks sizes and that each interface says where it goes.
    pub fn validate(&self) -> Result<()> {
        for (what, count) in [
            ("networks", self.networks.len()),
            ("security_groups", self.security_groups.len()),
            ("block_device_mapping_v2", self.block_device_mapping.len()),
        ] {
            if count > MAX_PLACEMENT_ITEMS {
                return Err(Error::InvalidInput(format!(
                    "{what}: at most {MAX_PLACEMENT_ITEMS} entries (got {count})"
                )));
            }
        }
        for (index, network) in self.networks.iter().enumerate() {
            if network.network.is_none() && network.port.is_none() && network.subnet.is_none() {
                return Err(Error::InvalidInput(format!(
                    "networks[{index}]: one of network, port or subnet must be given"
                )));
            }
            if network.port.is_some() && (network.network.is_some() || network.fixed_ip.is_some()) {
                return Err(Error::InvalidInput(format!(
                    "networks[{index}]: a port brings its own network and address: give port alone"
                )));
            }
        }
        if let Some(empty) = self
            .security_groups
            .iter()
            .position(|group| group.trim().is_empty())
        {
            return Err(Error::InvalidInput(format!(
                "security_groups[{empty}]: must not be empty"
            )));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_interface_must_say_where_it_goes_and_a_port_stands_alone() {
        let mut placement = Placement {
            networks: vec![NetworkRequest::default()],
            ..Placement::default()
        };
        assert_eq!(
            placement.validate().expect_err("nowhere").to_string(),
            "networks[0]: one of network, port or subnet must be given"
        );
        placement.networks[0] = NetworkRequest {
            port: Some("p".into()),
            fixed_ip: Some("10.0.0.3".into()),
            ..NetworkRequest::default()
        };
        assert!(placement.validate().is_err());
        placement.networks[0].fixed_ip = None;
        assert!(placement.validate().is_ok());
        assert_eq!(placement.given(), ["networks"]);
        assert!(Placement::default().is_empty());
    }

    #[test]
    fn a_placement_round_trips_through_json_without_its_empty_parts() {
        let placement = Placement {
            networks: vec![NetworkRequest {
                network: Some("private".into()),
                fixed_ip: Some("10.0.0.9".into()),
                ..NetworkRequest::default()
            }],
            key_name: Some("ops".into()),
            ..Placement::default()
        };
        let json = serde_json::to_value(&placement).expect("json");
        assert_eq!(
            json,
            serde_json::json!({"networks": [{"network": "private", "fixed_ip": "10.0.0.9"}], "key_name": "ops"})
        );
        assert_eq!(
            serde_json::from_value::<Placement>(json).expect("back"),
            placement
        );
    }
}
