//! What the docker backend cannot honour of each twin's properties: named
//! all at once, before anything is made, never silently ignored. A
//! property at its default (or empty) is honoured; the rest of the schema
//! is what the engine does (see the docs' table in
//! `docs/guide/backends.md`).

use serde_json::{Map, Value};

use super::Twin;
use crate::resources::ResourceFailure;
use crate::resources::openstack::cinder::Dialect;

/// Whether a property is given with something in it (an empty map, list
/// or text is as good as not given).
fn given(properties: &Map<String, Value>, name: &str) -> bool {
    match properties.get(name) {
        None | Some(Value::Null) => false,
        Some(Value::String(text)) => !text.is_empty(),
        Some(Value::Array(items)) => !items.is_empty(),
        Some(Value::Object(map)) => !map.is_empty(),
        Some(_) => true,
    }
}

fn is(properties: &Map<String, Value>, name: &str, value: &Value) -> bool {
    properties.get(name) == Some(value)
}

/// The properties of `properties` the docker backend cannot honour for
/// `twin`, each with why.
pub(super) fn refused(twin: Twin, properties: &Map<String, Value>) -> Vec<String> {
    let mut refused: Vec<String> = Vec::new();
    let refuse_given = |names: &[&str], refused: &mut Vec<String>| {
        for name in names {
            if given(properties, name) {
                refused.push((*name).to_owned());
            }
        }
    };
    let yes = Value::Bool(true);
    let no = Value::Bool(false);
    match twin {
        Twin::Net => {
            refuse_given(
                &[
                    "value_specs",
                    "tenant_id",
                    "dhcp_agent_ids",
                    "qos_policy",
                    "dns_domain",
                    "availability_zone_hints",
                ],
                &mut refused,
            );
            if is(properties, "shared", &yes) {
                refused.push("shared true".to_owned());
            }
            if is(properties, "port_security_enabled", &yes) {
                refused.push("port_security_enabled true".to_owned());
            }
            if is(properties, "admin_state_up", &no) {
                refused.push("admin_state_up false".to_owned());
            }
        }
        Twin::Subnet => {
            refuse_given(
                &[
                    "subnetpool",
                    "prefixlen",
                    "value_specs",
                    "tenant_id",
                    "dns_nameservers",
                    "allocation_pools",
                    "host_routes",
                    "ipv6_ra_mode",
                    "ipv6_address_mode",
                    "segment",
                ],
                &mut refused,
            );
            if properties
                .get("ip_version")
                .is_some_and(|version| version.as_i64() != Some(4))
            {
                refused.push("ip_version 6 (container networks here are IPv4)".to_owned());
            }
            if is(properties, "gateway_ip", &Value::String(String::new())) {
                refused.push("gateway_ip \"\" (a container network has a gateway)".to_owned());
            }
            if !given(properties, "cidr") {
                refused.push("a subnet without cidr (there are no subnet pools)".to_owned());
            }
        }
        Twin::Port => {
            refuse_given(
                &[
                    "device_id",
                    "device_owner",
                    "dns_name",
                    "value_specs",
                    "allowed_address_pairs",
                    "qos_policy",
                    "propagate_uplink_status",
                ],
                &mut refused,
            );
            let groups = properties
                .get("security_groups")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default();
            if groups.iter().any(|group| group.as_str() != Some("default")) {
                refused.push("security_groups (other than default)".to_owned());
            }
            if is(properties, "admin_state_up", &no) {
                refused.push("admin_state_up false".to_owned());
            }
            if is(properties, "port_security_enabled", &yes) {
                refused.push("port_security_enabled true".to_owned());
            }
            if is(properties, "no_fixed_ips", &yes) {
                refused.push("no_fixed_ips true (a container always has an address)".to_owned());
            }
            if properties
                .get("binding:vnic_type")
                .is_some_and(|vnic| vnic.as_str() != Some("normal"))
            {
                refused.push("binding:vnic_type other than normal".to_owned());
            }
            let fixed_ips = properties
                .get("fixed_ips")
                .and_then(Value::as_array)
                .map_or(0, Vec::len);
            if fixed_ips > 1 {
                refused.push(format!(
                    "fixed_ips with {fixed_ips} entries (a port has one IPv4 address)"
                ));
            }
        }
        Twin::Volume(Dialect::OpenStack) => {
            refuse_given(
                &[
                    "snapshot_id",
                    "backup_id",
                    "image",
                    "imageRef",
                    "source_volid",
                    "volume_type",
                    "scheduler_hints",
                ],
                &mut refused,
            );
            if let Some(zone) = properties.get("availability_zone").and_then(Value::as_str)
                && !zone.is_empty()
                && zone != "nova"
            {
                refused.push(format!(
                    "availability_zone {zone:?} (the only zone is nova)"
                ));
            }
        }
        Twin::Volume(Dialect::Aws) => {
            refuse_given(&["SnapshotId"], &mut refused);
            if let Some(zone) = properties.get("AvailabilityZone").and_then(Value::as_str)
                && !zone.is_empty()
                && zone != "nova"
            {
                refused.push(format!("AvailabilityZone {zone:?} (the only zone is nova)"));
            }
        }
        Twin::VolumeAttachment(_) => {}
    }
    refused
}

/// Fails naming everything of `properties` the docker backend cannot
/// honour for `type_name`.
pub(super) fn check(
    twin: Twin,
    type_name: &str,
    properties: &Map<String, Value>,
) -> Result<(), ResourceFailure> {
    let refused = refused(twin, properties);
    if refused.is_empty() {
        return Ok(());
    }
    Err(ResourceFailure::new(format!(
        "{type_name} on the docker backend cannot honour {}: the container engine has no such setting (the simulated and openstack backends take it)",
        refused.join(", ")
    )))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn map(value: Value) -> Map<String, Value> {
        value.as_object().cloned().unwrap_or_default()
    }

    #[test]
    fn what_cannot_be_honoured_is_named_and_defaults_pass() {
        let subnet = map(
            json!({"network": "n", "cidr": "10.0.0.0/24", "ip_version": 4,
            "enable_dhcp": true, "dns_nameservers": [], "value_specs": {}}),
        );
        assert_eq!(check(Twin::Subnet, "OS::Neutron::Subnet", &subnet), Ok(()));
        let subnet = map(
            json!({"network": "n", "cidr": "10.0.0.0/24", "ip_version": 4,
            "allocation_pools": [{"start": "10.0.0.10", "end": "10.0.0.20"}],
            "dns_nameservers": ["8.8.8.8"]}),
        );
        assert_eq!(
            check(Twin::Subnet, "OS::Neutron::Subnet", &subnet)
                .expect_err("refused")
                .to_string(),
            "OS::Neutron::Subnet on the docker backend cannot honour dns_nameservers, allocation_pools: the container engine has no such setting (the simulated and openstack backends take it)"
        );
        let six = map(json!({"network": "n", "cidr": "fd00::/64", "ip_version": 6}));
        assert!(refused(Twin::Subnet, &six)[0].starts_with("ip_version 6"));

        let port = map(json!({"network": "n", "admin_state_up": true,
            "binding:vnic_type": "normal", "security_groups": ["default"],
            "fixed_ips": [{"ip_address": "10.0.0.5"}]}));
        assert!(refused(Twin::Port, &port).is_empty());
        let port = map(json!({"network": "n", "security_groups": ["web"],
            "fixed_ips": [{"ip_address": "10.0.0.5"}, {"ip_address": "10.0.0.6"}]}));
        assert_eq!(
            refused(Twin::Port, &port),
            [
                "security_groups (other than default)",
                "fixed_ips with 2 entries (a port has one IPv4 address)"
            ]
        );

        let volume = map(json!({"size": 1, "availability_zone": "nova", "metadata": {}}));
        assert!(refused(Twin::Volume(Dialect::OpenStack), &volume).is_empty());
        let volume = map(json!({"size": 1, "image": "cirros", "availability_zone": "az2"}));
        assert_eq!(
            refused(Twin::Volume(Dialect::OpenStack), &volume),
            ["image", "availability_zone \"az2\" (the only zone is nova)"]
        );
        let net = map(json!({"shared": true, "admin_state_up": true, "value_specs": {}}));
        assert_eq!(refused(Twin::Net, &net), ["shared true"]);
    }
}
