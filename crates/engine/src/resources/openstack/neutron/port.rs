//! `OS::Neutron::Port`: a port on a network (`/work/heat-schemas.md` §6).
//! A create and an update wait until Neutron shows it built (`DOWN`, the
//! state of a port nothing is bound to, counts). Besides the port's own
//! fields, its attributes carry the full `subnets` of its fixed IPs and
//! its `network`, as Heat resolves them.

use async_trait::async_trait;
use ember_openstack::neutron::{Kind, Neutron};
use serde_json::{Map, Value, json};

use super::{
    Change, Settling, TaggedObject, copy_given, copy_name_and_given, fields, maps,
    merge_given_value_specs, present, resolve, resolve_property, security_group_ids, strings,
};
use crate::resources::openstack::{failure, text};
use crate::resources::{
    AttributeSchema, PropertySchema, PropertyType, ResourceFailure, ResourceRequest,
    ResourceTypeSchema,
};

pub struct Port;

/// Fields sent as the template gives them, on create and on update.
const PLAIN_FIELDS: [&str; 7] = [
    "device_id",
    "device_owner",
    "admin_state_up",
    "binding:vnic_type",
    "port_security_enabled",
    "propagate_uplink_status",
    "dns_name",
];

const VNIC_TYPES: [&str; 7] = [
    "normal",
    "direct",
    "macvtap",
    "direct-physical",
    "baremetal",
    "virtio-forwarder",
    "smart-nic",
];

#[async_trait]
impl TaggedObject for Port {
    const KIND: Kind = Kind::Port;
    const CREATE_SETTLING: Settling = Settling::UntilBuilt;
    const UPDATE_SETTLING: Settling = Settling::UntilBuilt;

    fn schema(&self) -> ResourceTypeSchema {
        let attribute = |name, description| AttributeSchema { name, description };
        ResourceTypeSchema {
            type_name: "OS::Neutron::Port",
            description: "A Neutron port.",
            properties: vec![
                PropertySchema::new("name", PropertyType::String, "A symbolic name for this port.")
                    .update_allowed(),
                PropertySchema::new(
                    "network",
                    PropertyType::String,
                    "Network this port belongs to. If you plan to use current port to assign Floating IP, you should specify fixed_ips with subnet.",
                )
                .required()
                .aliases(&["network_id"]),
                PropertySchema::new("device_id", PropertyType::String, "Device ID of this port.")
                    .default(json!(""))
                    .update_allowed(),
                PropertySchema::new("device_owner", PropertyType::String, "Name of the network owning the port. The value is typically network:floatingip or network:router_interface or network:dhcp.")
                    .default(json!(""))
                    .update_allowed(),
                PropertySchema::new(
                    "fixed_ips",
                    PropertyType::List,
                    "Desired IPs for this port: a list of maps {subnet, ip_address}.",
                )
                .update_allowed(),
                PropertySchema::new(
                    "security_groups",
                    PropertyType::List,
                    "Security group IDs or names to associate with this port.",
                )
                .update_allowed(),
                PropertySchema::new(
                    "replacement_policy",
                    PropertyType::String,
                    "Policy on how to respond to a stack-update for this resource. REPLACE_ALWAYS will replace the port regardless of any property changes. AUTO will update the existing port for any changed update-allowed property. (Deprecated.)",
                )
                .default(json!("AUTO"))
                .allowed_values(vec![json!("REPLACE_ALWAYS"), json!("AUTO")])
                .update_allowed(),
                PropertySchema::new("dns_name", PropertyType::String, "DNS name associated with the port.")
                    .update_allowed(),
                PropertySchema::new("tags", PropertyType::List, "The tags to be added to the port.")
                    .update_allowed(),
                PropertySchema::new("value_specs", PropertyType::Map, "Extra parameters to include in the request.")
                    .default(json!({}))
                    .update_allowed(),
                PropertySchema::new("admin_state_up", PropertyType::Boolean, "The administrative state of this port.")
                    .default(json!(true))
                    .update_allowed(),
                PropertySchema::new("mac_address", PropertyType::String, "MAC address to give to this port. The default update policy of this property in neutron is that allow admin role only."),
                PropertySchema::new(
                    "allowed_address_pairs",
                    PropertyType::List,
                    "Additional MAC/IP address pairs allowed to pass through the port: a list of maps {mac_address, ip_address}.",
                )
                .update_allowed(),
                PropertySchema::new(
                    "binding:vnic_type",
                    PropertyType::String,
                    "The vnic type to be bound on the neutron port.",
                )
                .default(json!("normal"))
                .allowed_values(VNIC_TYPES.iter().map(|vnic| json!(vnic)).collect())
                .update_allowed(),
                PropertySchema::new(
                    "port_security_enabled",
                    PropertyType::Boolean,
                    "Flag to enable/disable port security on the port.",
                )
                .update_allowed(),
                PropertySchema::new("qos_policy", PropertyType::String, "The name or ID of QoS policy to attach to this port.")
                    .update_allowed(),
                PropertySchema::new(
                    "propagate_uplink_status",
                    PropertyType::Boolean,
                    "Flag to enable/disable propagate uplink status on the port.",
                )
                .update_allowed(),
                PropertySchema::new(
                    "no_fixed_ips",
                    PropertyType::Boolean,
                    "Flag to disable all fixed ips on the port.",
                )
                .default(json!(false))
                .update_allowed(),
            ],
            attributes: vec![
                attribute("admin_state_up", "The administrative state of this port."),
                attribute("device_id", "Unique identifier for the device."),
                attribute("device_owner", "Name of the network owning the port."),
                attribute("fixed_ips", "Fixed IP addresses."),
                attribute("mac_address", "MAC address of the port."),
                attribute("name", "Friendly name of the port."),
                attribute("network_id", "Unique identifier for the network owning the port."),
                attribute("security_groups", "A list of security groups for the port."),
                attribute("status", "The status of the port."),
                attribute("tenant_id", "Tenant owning the port."),
                attribute("allowed_address_pairs", "Additional MAC/IP address pairs allowed to pass through a port."),
                attribute("port_security_enabled", "Port security enabled of the port."),
                attribute("qos_policy_id", "The QoS policy ID attached to this port."),
                attribute("dns_assignment", "The DNS assigned to the port."),
                attribute("propagate_uplink_status", "Flag to enable/disable propagate uplink status on the port."),
                attribute("subnets", "Subnets of this port."),
                attribute("network", "The attributes of the network owning the port."),
            ],
            accepts_any_properties: false,
            accepts_any_attributes: false,
        }
    }

    async fn create_body(
        &self,
        neutron: &Neutron,
        request: &ResourceRequest,
        name: &str,
    ) -> Result<Map<String, Value>, ResourceFailure> {
        let properties = &request.properties;
        let no_fixed_ips = present(properties, "no_fixed_ips") == Some(&json!(true));
        let fixed_ips_given = !maps(properties, "fixed_ips")?.is_empty();
        if no_fixed_ips && fixed_ips_given {
            return Err(ResourceFailure::new(
                "Cannot define the following properties at the same time: fixed_ips, no_fixed_ips"
                    .to_owned(),
            ));
        }
        let network = text(properties, "network").unwrap_or_default();
        let mut body = Map::new();
        body.insert(
            "network_id".to_owned(),
            json!(resolve(neutron, Kind::Network, &network).await?),
        );
        copy_name_and_given(&mut body, properties, name, &PLAIN_FIELDS);
        copy_given(&mut body, properties, &["mac_address"]);
        if no_fixed_ips {
            body.insert("fixed_ips".to_owned(), json!([]));
        } else if fixed_ips_given {
            // An empty list is left out: Neutron then picks an address.
            body.insert(
                "fixed_ips".to_owned(),
                fixed_ips(neutron, properties).await?,
            );
        }
        if present(properties, "allowed_address_pairs").is_some() {
            body.insert(
                "allowed_address_pairs".to_owned(),
                address_pairs(properties)?,
            );
        }
        // Not given: Neutron puts the port in the project's `default`
        // group; `[]` means no group at all.
        if present(properties, "security_groups").is_some() {
            let groups = strings(properties, "security_groups")?;
            body.insert(
                "security_groups".to_owned(),
                json!(security_group_ids(neutron, &request.project_id, &groups).await?),
            );
        }
        if let Some(policy) =
            resolve_property(neutron, properties, "qos_policy", Kind::QosPolicy).await?
        {
            body.insert("qos_policy_id".to_owned(), json!(policy));
        }
        merge_given_value_specs(&mut body, properties);
        Ok(body)
    }

    async fn update_body(
        &self,
        neutron: &Neutron,
        change: &Change<'_>,
    ) -> Result<Map<String, Value>, ResourceFailure> {
        let after = change.after();
        let mut body = Map::new();
        change.changed_name(&mut body, Self::KIND);
        change.copy_changed(&mut body, &PLAIN_FIELDS);
        let no_fixed_ips = present(after, "no_fixed_ips") == Some(&json!(true));
        if no_fixed_ips && change.changed("no_fixed_ips").is_some() {
            body.insert("fixed_ips".to_owned(), json!([]));
        } else if change.changed("fixed_ips").is_some() && !maps(after, "fixed_ips")?.is_empty() {
            // Removed or emptied: the port keeps the addresses it has.
            body.insert("fixed_ips".to_owned(), fixed_ips(neutron, after).await?);
        }
        if change.changed("allowed_address_pairs").is_some() {
            body.insert("allowed_address_pairs".to_owned(), address_pairs(after)?);
        }
        if change.changed("security_groups").is_some() {
            // Removed from the template: back to the project's `default`.
            let groups = match present(after, "security_groups") {
                Some(_) => strings(after, "security_groups")?,
                None => vec!["default".to_owned()],
            };
            body.insert(
                "security_groups".to_owned(),
                json!(security_group_ids(neutron, &change.request.project_id, &groups).await?),
            );
        }
        if change.changed("qos_policy").is_some() {
            let policy = resolve_property(neutron, after, "qos_policy", Kind::QosPolicy).await?;
            body.insert("qos_policy_id".to_owned(), json!(policy));
        }
        change.changed_value_specs(&mut body);
        if let Some(Value::Object(asked)) = body.get("binding:profile") {
            let live = neutron
                .get(Kind::Port, change.id)
                .await
                .map_err(failure)?
                .unwrap_or(Value::Null);
            let before = change
                .before
                .get("value_specs")
                .and_then(|value_specs| value_specs.get("binding:profile"));
            let merged = merged_profile(&live["binding:profile"], before, asked);
            body.insert("binding:profile".to_owned(), merged);
        }
        Ok(body)
    }

    /// The port's fields, the full subnets of its fixed IPs and its full
    /// network (Heat's `subnets` and `network`).
    async fn attributes(
        &self,
        neutron: &Neutron,
        object: Value,
    ) -> Result<Map<String, Value>, ResourceFailure> {
        let mut subnets = Vec::new();
        for fixed_ip in object["fixed_ips"].as_array().into_iter().flatten() {
            if let Some(subnet_id) = fixed_ip["subnet_id"].as_str()
                && let Some(subnet) = neutron
                    .get(Kind::Subnet, subnet_id)
                    .await
                    .map_err(failure)?
            {
                subnets.push(subnet);
            }
        }
        let network = match object["network_id"].as_str() {
            Some(network_id) => neutron
                .get(Kind::Network, network_id)
                .await
                .map_err(failure)?,
            None => None,
        };
        let mut attributes = fields(object);
        attributes.insert("subnets".to_owned(), Value::Array(subnets));
        attributes.insert("network".to_owned(), network.unwrap_or(Value::Null));
        Ok(attributes)
    }

    /// `replacement_policy: REPLACE_ALWAYS` replaces the port on every
    /// change (Heat's `needs_replace`).
    /// The old port lets its addresses go, so its replacement can take the
    /// same fixed IPs (Heat's `Port.prepare_for_replace`); one gone
    /// already has none to give.
    async fn prepare_for_replace(
        &self,
        neutron: &Neutron,
        id: &str,
    ) -> Result<(), ResourceFailure> {
        let mut cleared = Map::new();
        cleared.insert("fixed_ips".to_owned(), json!([]));
        match neutron.update(Kind::Port, id, cleared).await {
            Ok(_) => Ok(()),
            Err(error) if error.is_not_found() => Ok(()),
            Err(error) => Err(failure(error)),
        }
    }

    fn needs_replacement(
        &self,
        old: &Map<String, Value>,
        new: &Map<String, Value>,
    ) -> Option<bool> {
        (text(new, "replacement_policy").as_deref() == Some("REPLACE_ALWAYS") && old != new)
            .then_some(true)
    }
}

/// A port's `binding:profile` after an update (Heat's 3-way merge): the
/// live profile, with each entry the template changed since `before` set
/// (or, changed to null, removed) — the entries Neutron or a driver set
/// (an SR-IOV `pci_slot`) stay.
fn merged_profile(live: &Value, before: Option<&Value>, asked: &Map<String, Value>) -> Value {
    let mut merged = live.as_object().cloned().unwrap_or_default();
    for (key, value) in asked {
        if before.and_then(|before| before.get(key)) == Some(value) {
            continue;
        }
        if value.is_null() {
            merged.remove(key);
        } else {
            merged.insert(key.clone(), value.clone());
        }
    }
    Value::Object(merged)
}

/// The fixed IPs as Neutron takes them: each `{subnet_id, ip_address}`,
/// `subnet` (a name or id) resolved, unset keys left out.
async fn fixed_ips(
    neutron: &Neutron,
    properties: &Map<String, Value>,
) -> Result<Value, ResourceFailure> {
    let mut entries = Vec::new();
    for (index, given) in maps(properties, "fixed_ips")?.into_iter().enumerate() {
        let mut entry = Map::new();
        for (key, value) in given {
            match key.as_str() {
                _ if value.is_null() => {}
                "subnet" | "subnet_id" => {
                    let subnet = text(given, key).unwrap_or_default();
                    entry.insert(
                        "subnet_id".to_owned(),
                        json!(resolve(neutron, Kind::Subnet, &subnet).await?),
                    );
                }
                "ip_address" => {
                    entry.insert(key.clone(), value.clone());
                }
                other => {
                    return Err(ResourceFailure::new(format!(
                        "fixed_ips[{index}]: unknown key {other:?} (known: subnet, ip_address)"
                    )));
                }
            }
        }
        entries.push(Value::Object(entry));
    }
    Ok(Value::Array(entries))
}

/// The allowed address pairs as Neutron takes them: each `{ip_address,
/// mac_address?}`, a null MAC left out (Neutron refuses it).
fn address_pairs(properties: &Map<String, Value>) -> Result<Value, ResourceFailure> {
    let mut pairs = Vec::new();
    for (index, given) in maps(properties, "allowed_address_pairs")?
        .into_iter()
        .enumerate()
    {
        if let Some(unknown) = given
            .keys()
            .find(|key| !matches!(key.as_str(), "ip_address" | "mac_address"))
        {
            return Err(ResourceFailure::new(format!(
                "allowed_address_pairs[{index}]: unknown key {unknown:?} (known: mac_address, ip_address)"
            )));
        }
        if present(given, "ip_address").is_none() {
            return Err(ResourceFailure::new(format!(
                "allowed_address_pairs[{index}].ip_address: property is required"
            )));
        }
        let pair: Map<String, Value> = given
            .iter()
            .filter(|(_, value)| !value.is_null())
            .map(|(key, value)| (key.clone(), value.clone()))
            .collect();
        pairs.push(Value::Object(pair));
    }
    Ok(Value::Array(pairs))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn address_pairs_drop_null_macs_and_need_an_address() {
        let properties = fields(json!({"allowed_address_pairs": [
            {"ip_address": "10.0.0.9", "mac_address": null},
            {"ip_address": "10.0.0.0/24", "mac_address": "fa:16:3e:00:00:01"},
        ]}));
        assert_eq!(
            address_pairs(&properties).expect("pairs"),
            json!([
                {"ip_address": "10.0.0.9"},
                {"ip_address": "10.0.0.0/24", "mac_address": "fa:16:3e:00:00:01"},
            ])
        );
        let missing =
            fields(json!({"allowed_address_pairs": [{"mac_address": "fa:16:3e:00:00:01"}]}));
        assert_eq!(
            address_pairs(&missing).expect_err("no address").to_string(),
            "allowed_address_pairs[0].ip_address: property is required"
        );
        assert_eq!(address_pairs(&fields(json!({}))).expect("none"), json!([]));
    }

    #[test]
    fn a_binding_profile_keeps_what_neutron_set() {
        let live =
            json!({"pci_slot": "0000:03:00.1", "capabilities": ["switchdev"], "trusted": false});
        let before = json!({"capabilities": ["switchdev"], "trusted": false});
        let asked = fields(json!({"capabilities": ["switchdev"], "trusted": true, "gone": null}));
        assert_eq!(
            merged_profile(&live, Some(&before), &asked),
            json!({"pci_slot": "0000:03:00.1", "capabilities": ["switchdev"], "trusted": true})
        );
        let dropped = fields(json!({"trusted": null}));
        assert_eq!(
            merged_profile(&live, Some(&before), &dropped),
            json!({"pci_slot": "0000:03:00.1", "capabilities": ["switchdev"]})
        );
    }

    #[test]
    fn replace_always_replaces_on_any_change() {
        let old = fields(json!({"name": "a", "replacement_policy": "REPLACE_ALWAYS"}));
        let renamed = fields(json!({"name": "b", "replacement_policy": "REPLACE_ALWAYS"}));
        assert_eq!(Port.needs_replacement(&old, &renamed), Some(true));
        assert_eq!(Port.needs_replacement(&old, &old), None);
        let auto = fields(json!({"name": "b", "replacement_policy": "AUTO"}));
        assert_eq!(Port.needs_replacement(&old, &auto), None);
    }
}
