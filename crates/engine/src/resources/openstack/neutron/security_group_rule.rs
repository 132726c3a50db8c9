//! `OS::Neutron::SecurityGroupRule`: one rule added to a security group
//! (`/work/heat-schemas.md` §10). Nothing changes in place: every change
//! is a new rule.
//!
//! A rule carries no tags, so it is found again by what it is: Neutron
//! keeps at most one rule of a given direction, ethertype, protocol,
//! ports and remote in a group, and answers a second with 409
//! (`SecurityGroupRuleExists`). A create that runs again (a retry,
//! another engine resuming) meets that answer and adopts the rule it
//! finds with those fields; a delete taken over from a create that
//! recorded no id finds it the same way. (A rule of the same fields made
//! by someone else is adopted alike: Neutron cannot tell them apart.)

use async_trait::async_trait;
use ember_openstack::neutron::{Kind, Neutron, id_of};
use serde_json::{Map, Value, json};

use super::rules::{PROTOCOL_NAMES, Rule, one_of, port, protocol, text_of};
use super::{as_it_is, fields, neutron_for, present, resolve};
use crate::domain::{Resource, StackAction};
use crate::resources::openstack::{Cloud, failure, physical_id};
use crate::resources::{
    PropertySchema, PropertyType, ResourceFailure, ResourceOutcome, ResourceRequest, ResourceType,
    ResourceTypeSchema,
};

pub struct SecurityGroupRule {
    cloud: Cloud,
    schema: ResourceTypeSchema,
}

impl SecurityGroupRule {
    pub fn new(cloud: &Cloud) -> SecurityGroupRule {
        SecurityGroupRule {
            cloud: cloud.clone(),
            schema: schema(),
        }
    }

    /// The group's id and the rule the properties ask for, names resolved.
    async fn wanted(
        &self,
        neutron: &Neutron,
        properties: &Map<String, Value>,
    ) -> Result<(String, Rule), ResourceFailure> {
        let rule = rule_of(properties)?;
        let group = text_of(properties, "security_group").unwrap_or_default();
        let group_id = resolve(neutron, Kind::SecurityGroup, &group).await?;
        let mut rule = rule;
        if let Some(remote) = &rule.remote_group_id {
            rule.remote_group_id = Some(resolve(neutron, Kind::SecurityGroup, remote).await?);
        }
        Ok((group_id, rule))
    }

    /// The group's rule with `rule`'s fields, if it has one.
    async fn find(
        &self,
        neutron: &Neutron,
        group_id: &str,
        rule: &Rule,
    ) -> Result<Option<Value>, ResourceFailure> {
        let rules = neutron
            .list(Kind::SecurityGroupRule, &[("security_group_id", group_id)])
            .await
            .map_err(failure)?;
        Ok(rules
            .into_iter()
            .find(|present| Rule::from_neutron(present).key() == rule.key()))
    }
}

/// The rule the properties ask for (its groups as given), checked as
/// Heat's `validate` checks it.
fn rule_of(properties: &Map<String, Value>) -> Result<Rule, ResourceFailure> {
    if present(properties, "remote_group").is_some()
        && present(properties, "remote_ip_prefix").is_some()
    {
        return Err(ResourceFailure::new(
            "Cannot define the following properties at the same time: remote_group, remote_ip_prefix".to_owned(),
        ));
    }
    let direction = one_of(properties, "direction", "direction", &["ingress", "egress"])?;
    let ethertype = one_of(properties, "ethertype", "ethertype", &["IPv4", "IPv6"])?;
    let mut rule = Rule::open(
        direction.as_deref().unwrap_or("ingress"),
        ethertype.as_deref().unwrap_or("IPv4"),
    );
    rule.protocol = protocol(properties, "protocol", "protocol")?;
    rule.port_range_min = port(properties, "port_range_min", "port_range_min")?;
    rule.port_range_max = port(properties, "port_range_max", "port_range_max")?;
    rule.remote_ip_prefix = text_of(properties, "remote_ip_prefix");
    rule.remote_group_id = text_of(properties, "remote_group");
    rule.description = text_of(properties, "description");
    let icmp = matches!(
        rule.protocol.as_deref(),
        Some("icmp" | "icmpv6" | "ipv6-icmp")
    );
    if let (Some(minimum), Some(maximum)) = (rule.port_range_min, rule.port_range_max)
        && !icmp
        && maximum < minimum
    {
        return Err(ResourceFailure::new(
            "The minimum port number must be less than or equal to the maximum port number."
                .to_owned(),
        ));
    }
    Ok(rule)
}

/// The type's schema (shared with the simulated backend's twin).
pub fn schema() -> ResourceTypeSchema {
    let mut protocols: Vec<Value> = PROTOCOL_NAMES.iter().map(|name| json!(name)).collect();
    protocols.extend((0..=255).map(|number: u16| json!(number.to_string())));
    ResourceTypeSchema {
        type_name: "OS::Neutron::SecurityGroupRule",
        description: "A rule of a Neutron security group.",
        properties: vec![
            PropertySchema::new(
                "security_group",
                PropertyType::String,
                "Security group name or ID to add rule.",
            )
            .required(),
            PropertySchema::new("description", PropertyType::String, "Description of the security group rule."),
            PropertySchema::new("direction", PropertyType::String, "The direction in which the security group rule is applied. For a compute instance, an ingress security group rule matches traffic that is incoming (ingress) for that instance. An egress rule is applied to traffic leaving the instance.")
                .default(json!("ingress"))
                .allowed_values(vec![json!("ingress"), json!("egress")]),
            PropertySchema::new("ethertype", PropertyType::String, "Ethertype of the traffic.")
                .default(json!("IPv4"))
                .allowed_values(vec![json!("IPv4"), json!("IPv6")]),
            PropertySchema::new(
                "port_range_min",
                PropertyType::Integer,
                "The minimum port number in the range that is matched by the security group rule. If the protocol is TCP or UDP, this value must be less than or equal to the value of the port_range_max attribute. If the protocol is ICMP, this value must be an ICMP type.",
            )
            .range(0.0, 65535.0),
            PropertySchema::new(
                "port_range_max",
                PropertyType::Integer,
                "The maximum port number in the range that is matched by the security group rule. The port_range_min attribute constrains the port_range_max attribute. If the protocol is ICMP, this value must be an ICMP code.",
            )
            .range(0.0, 65535.0),
            PropertySchema::new(
                "protocol",
                PropertyType::String,
                "The protocol that is matched by the security group rule. Allowed values are ah, dccp, egp, esp, gre, icmp, icmpv6, igmp, ipv6-encap, ipv6-frag, ipv6-icmp, ipv6-nonxt, ipv6-opts, ipv6-route, ospf, pgm, rsvp, sctp, tcp, udp, udplite, vrrp and integer representations [0-255].",
            )
            .default(json!("tcp"))
            .allowed_values(protocols),
            PropertySchema::new(
                "remote_group",
                PropertyType::String,
                "The remote group name or ID to be associated with this security group rule.",
            ),
            PropertySchema::new(
                "remote_ip_prefix",
                PropertyType::String,
                "The remote IP prefix (CIDR) to be associated with this security group rule.",
            ),
        ],
        // Only `show` (every type's), as Heat.
        attributes: Vec::new(),
        accepts_any_properties: false,
        accepts_any_attributes: false,
    }
}

#[async_trait]
impl ResourceType for SecurityGroupRule {
    fn schema(&self) -> &ResourceTypeSchema {
        &self.schema
    }

    /// Makes the rule, or adopts the one of the same fields Neutron says
    /// exists already (see the module's doc).
    async fn create(&self, request: &ResourceRequest) -> Result<ResourceOutcome, ResourceFailure> {
        let neutron = neutron_for(&self.cloud, request.stack_id).await?;
        let (group_id, rule) = self.wanted(&neutron, &request.properties).await?;
        let made = match neutron
            .create(Kind::SecurityGroupRule, rule.body(&group_id), &[])
            .await
        {
            Ok(made) => made,
            Err(error) if error.is_conflict() => self
                .find(&neutron, &group_id, &rule)
                .await?
                .ok_or_else(|| failure(error))?,
            Err(error) => return Err(failure(error)),
        };
        Ok(ResourceOutcome {
            physical_id: id_of(&made).map_err(failure)?,
            attributes: fields(made),
            data: Value::Object(Map::new()),
        })
    }

    /// Every change replaces the rule; an update only runs without one
    /// (nothing changed): the rule as it is.
    async fn update(
        &self,
        request: &ResourceRequest,
        current: &Resource,
    ) -> Result<ResourceOutcome, ResourceFailure> {
        match as_it_is(current) {
            Some(outcome) => Ok(outcome),
            None => self.create(request).await,
        }
    }

    async fn delete(&self, current: &Resource) -> Result<(), ResourceFailure> {
        let Some(id) = physical_id(current) else {
            // Nothing recorded: the create failed before making the rule
            // (it records the id as soon as the rule exists).
            return Ok(());
        };
        let neutron = neutron_for(&self.cloud, current.stack_id).await?;
        neutron
            .delete(Kind::SecurityGroupRule, id)
            .await
            .map_err(failure)
    }

    /// A create in flight when its engine went away may have made the rule
    /// without recording its id: found by its fields.
    async fn resume_delete(&self, in_flight: &Resource) -> Result<(), ResourceFailure> {
        if physical_id(in_flight).is_some() {
            return self.delete(in_flight).await;
        }
        let neutron = neutron_for(&self.cloud, in_flight.stack_id).await?;
        let properties = in_flight
            .properties
            .as_object()
            .cloned()
            .unwrap_or_default();
        let (group_id, rule) = match self.wanted(&neutron, &properties).await {
            Ok(wanted) => wanted,
            // The group is gone, and its rules with it.
            Err(_) => return Ok(()),
        };
        if let Some(made) = self.find(&neutron, &group_id, &rule).await? {
            let id = id_of(&made).map_err(failure)?;
            neutron
                .delete(Kind::SecurityGroupRule, &id)
                .await
                .map_err(failure)?;
        }
        Ok(())
    }

    async fn check(&self, current: &Resource) -> Result<(), ResourceFailure> {
        let Some(id) = physical_id(current) else {
            return Err(ResourceFailure::new(
                "no security group rule was created".to_owned(),
            ));
        };
        let neutron = neutron_for(&self.cloud, current.stack_id).await?;
        match neutron
            .get(Kind::SecurityGroupRule, id)
            .await
            .map_err(failure)?
        {
            Some(_) => Ok(()),
            None => Err(ResourceFailure::new(format!(
                "the security group rule {id} is gone"
            ))),
        }
    }

    /// Every step is taken over: a create finds the rule an earlier attempt
    /// made by its fields, a delete finds it gone or deletes it.
    fn take_over(&self, _step: StackAction) -> Result<(), String> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rule_is_checked_as_heat_checks_it() {
        let message = |value| rule_of(&fields(value)).expect_err("invalid").to_string();
        assert_eq!(
            message(json!({"remote_group": "g", "remote_ip_prefix": "10.0.0.0/8"})),
            "Cannot define the following properties at the same time: remote_group, remote_ip_prefix"
        );
        assert_eq!(
            message(json!({"protocol": "tcp", "port_range_min": 90, "port_range_max": 80})),
            "The minimum port number must be less than or equal to the maximum port number."
        );
        // ICMP's "ports" are a type and a code: any order.
        assert!(
            rule_of(&fields(
                json!({"protocol": "icmp", "port_range_min": 8, "port_range_max": 0})
            ))
            .is_ok()
        );
        let rule = rule_of(&fields(json!({"protocol": "udp", "port_range_min": 53, "port_range_max": 53, "remote_group": "dns"})))
            .expect("a rule");
        assert_eq!(rule.remote_group_id.as_deref(), Some("dns"));
        assert_eq!(rule.direction, "ingress");
        assert_eq!(rule.ethertype, "IPv4");
    }
}
