//! `AWS::EC2::SecurityGroup`: a Neutron security group described the EC2
//! way (`/work/heat-schemas.md` §17), named after the resource, its
//! ingress and egress lists reconciled as the OS type's rules are
//! ([`super::rules`]).
//!
//! Two places where Ember does not copy Heat, on purpose: a rule with a
//! `CidrIp` and no ports keeps its `CidrIp` (Heat drops it, which opens
//! the rule to every address), and an update without egress rules keeps
//! Neutron's default egress rules, as a create does (Heat's update deletes
//! them).

use async_trait::async_trait;
use ember_openstack::neutron::{Kind, Neutron, id_of};
use serde_json::{Map, Value, json};

use super::rules::{Rule, reconcile, resolve_remote_groups, text_of, with_default_egress};
use super::{Change, Settling, TaggedObject, maps};
use crate::resources::openstack::{failure, text};
use crate::resources::{
    PropertySchema, PropertyType, ResourceFailure, ResourceRequest, ResourceTypeSchema,
};

pub struct AwsSecurityGroup;

/// The keys of an EC2 rule Ember reads (`SourceSecurityGroupOwnerId` is
/// refused, as Heat has it not implemented).
const RULE_KEYS: [&str; 6] = [
    "CidrIp",
    "FromPort",
    "ToPort",
    "IpProtocol",
    "SourceSecurityGroupId",
    "SourceSecurityGroupName",
];

#[async_trait]
impl TaggedObject for AwsSecurityGroup {
    const KIND: Kind = Kind::SecurityGroup;
    const CREATE_SETTLING: Settling = Settling::AsAnswered;

    fn schema(&self) -> ResourceTypeSchema {
        ResourceTypeSchema {
            type_name: "AWS::EC2::SecurityGroup",
            description: "A security group (a Neutron security group).",
            properties: vec![
                PropertySchema::new("GroupDescription", PropertyType::String, "Description of the security group.")
                    .required(),
                PropertySchema::new("VpcId", PropertyType::String, "Physical ID of the VPC. Not implemented."),
                PropertySchema::new(
                    "SecurityGroupIngress",
                    PropertyType::List,
                    "List of security group ingress rules: maps {CidrIp, FromPort, ToPort, IpProtocol, SourceSecurityGroupId, SourceSecurityGroupName}.",
                )
                .update_allowed(),
                PropertySchema::new(
                    "SecurityGroupEgress",
                    PropertyType::List,
                    "List of security group egress rules: maps {CidrIp, FromPort, ToPort, IpProtocol, SourceSecurityGroupId, SourceSecurityGroupName}.",
                )
                .update_allowed(),
            ],
            // Only `show` (every type's), as Heat.
            attributes: Vec::new(),
            accepts_any_properties: false,
            accepts_any_attributes: false,
        }
    }

    async fn create_body(
        &self,
        _neutron: &Neutron,
        request: &ResourceRequest,
        name: &str,
    ) -> Result<Map<String, Value>, ResourceFailure> {
        // The rules are checked before anything is made.
        desired_rules(&request.properties)?;
        let mut body = Map::new();
        body.insert("name".to_owned(), json!(name));
        body.insert(
            "description".to_owned(),
            json!(text(&request.properties, "GroupDescription").unwrap_or_default()),
        );
        Ok(body)
    }

    /// Nothing of the group itself changes in place (only its rules).
    async fn update_body(
        &self,
        _neutron: &Neutron,
        _change: &Change<'_>,
    ) -> Result<Map<String, Value>, ResourceFailure> {
        Ok(Map::new())
    }

    async fn after_create(
        &self,
        neutron: &Neutron,
        request: &ResourceRequest,
        object: &Value,
    ) -> Result<(), ResourceFailure> {
        let id = id_of(object).map_err(failure)?;
        apply_rules(neutron, &request.project_id, &id, &request.properties).await
    }

    async fn after_update(
        &self,
        neutron: &Neutron,
        change: &Change<'_>,
    ) -> Result<(), ResourceFailure> {
        if change.changed("SecurityGroupIngress").is_none()
            && change.changed("SecurityGroupEgress").is_none()
        {
            return Ok(());
        }
        apply_rules(
            neutron,
            &change.request.project_id,
            change.id,
            change.after(),
        )
        .await
    }
}

async fn apply_rules(
    neutron: &Neutron,
    project_id: &str,
    id: &str,
    properties: &Map<String, Value>,
) -> Result<(), ResourceFailure> {
    let mut desired = desired_rules(properties)?;
    resolve_remote_groups(neutron, project_id, &mut desired).await?;
    reconcile(neutron, id, &desired).await
}

/// The group's rules: the ingress and egress lists converted, plus the
/// default egress rules when no egress rule is listed.
pub(crate) fn desired_rules(properties: &Map<String, Value>) -> Result<Vec<Rule>, ResourceFailure> {
    let mut rules = ec2_rules(properties, "SecurityGroupIngress", "ingress")?;
    rules.extend(ec2_rules(properties, "SecurityGroupEgress", "egress")?);
    Ok(with_default_egress(rules))
}

/// One list of EC2 rules as Neutron rules (Heat's `_prop_rules_to_common`
/// and `_convert_to_neutron_rule`): IPv4, a negative port meaning none,
/// the protocol as given, the source group by id or by name.
fn ec2_rules(
    properties: &Map<String, Value>,
    list: &str,
    direction: &str,
) -> Result<Vec<Rule>, ResourceFailure> {
    let mut rules = Vec::new();
    for (index, entry) in maps(properties, list)?.into_iter().enumerate() {
        if entry.contains_key("SourceSecurityGroupOwnerId") {
            return Err(ResourceFailure::new(format!(
                "{list}[{index}]: Property SourceSecurityGroupOwnerId not implemented yet"
            )));
        }
        if let Some(unknown) = entry.keys().find(|key| !RULE_KEYS.contains(&key.as_str())) {
            return Err(ResourceFailure::new(format!(
                "{list}[{index}]: unknown key {unknown:?} (known: {})",
                RULE_KEYS.join(", ")
            )));
        }
        let port = |key: &str| -> Result<Option<i64>, ResourceFailure> {
            match text_of(entry, key) {
                None => Ok(None),
                Some(given) => match given.trim().parse::<i64>() {
                    Ok(port) if port < 0 => Ok(None),
                    Ok(port) => Ok(Some(port)),
                    Err(_) => Err(ResourceFailure::new(format!(
                        "{list}[{index}].{key}: {given:?} is not an integer"
                    ))),
                },
            }
        };
        let mut rule = Rule::open(direction, "IPv4");
        rule.port_range_min = port("FromPort")?;
        rule.port_range_max = port("ToPort")?;
        rule.protocol = text_of(entry, "IpProtocol");
        rule.remote_ip_prefix = text_of(entry, "CidrIp");
        rule.remote_group_id = text_of(entry, "SourceSecurityGroupId")
            .or_else(|| text_of(entry, "SourceSecurityGroupName"));
        rules.push(rule);
    }
    Ok(rules)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::openstack::neutron::fields;

    #[test]
    fn ec2_rules_become_neutron_rules() {
        let properties = fields(json!({
            "SecurityGroupIngress": [
                {"IpProtocol": "tcp", "FromPort": "22", "ToPort": "22", "CidrIp": "0.0.0.0/0"},
                {"IpProtocol": "icmp", "FromPort": "-1", "ToPort": "-1", "CidrIp": "10.0.0.0/8"},
                {"IpProtocol": "tcp", "FromPort": 80, "ToPort": 80, "SourceSecurityGroupName": "web"},
            ],
        }));
        let rules = desired_rules(&properties).expect("rules");
        assert_eq!(
            rules[0],
            Rule {
                protocol: Some("tcp".to_owned()),
                port_range_min: Some(22),
                port_range_max: Some(22),
                remote_ip_prefix: Some("0.0.0.0/0".to_owned()),
                ..Rule::open("ingress", "IPv4")
            }
        );
        assert_eq!(
            (rules[1].port_range_min, rules[1].port_range_max),
            (None, None),
            "negative: no port"
        );
        assert_eq!(
            rules[1].remote_ip_prefix.as_deref(),
            Some("10.0.0.0/8"),
            "the prefix is kept"
        );
        assert_eq!(rules[2].remote_group_id.as_deref(), Some("web"));
        assert_eq!(
            rules.len(),
            5,
            "the default egress rules are kept without egress rules"
        );

        let egress = fields(
            json!({"SecurityGroupEgress": [{"IpProtocol": "udp", "FromPort": 53, "ToPort": 53, "CidrIp": "10.0.0.2/32"}]}),
        );
        let rules = desired_rules(&egress).expect("rules");
        assert_eq!(rules.len(), 1, "an egress rule replaces the defaults");
        assert_eq!(rules[0].direction, "egress");
    }

    #[test]
    fn an_owner_id_is_not_implemented() {
        let properties =
            fields(json!({"SecurityGroupIngress": [{"SourceSecurityGroupOwnerId": "o"}]}));
        assert_eq!(
            desired_rules(&properties).expect_err("refused").to_string(),
            "SecurityGroupIngress[0]: Property SourceSecurityGroupOwnerId not implemented yet"
        );
    }
}
