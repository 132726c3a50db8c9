//! Security group rules as Ember compares, makes and reconciles them, for
//! `OS::Neutron::SecurityGroup` (its `rules`), `AWS::EC2::SecurityGroup`
//! (its ingress and egress lists) and `OS::Neutron::SecurityGroupRule`.
//!
//! A group's rules are reconciled, never appended: the rules the group
//! has are compared with the ones asked for by Heat's key (direction,
//! ethertype, protocol, ports, remote group, remote prefix), stale ones
//! deleted and missing ones made. So a create or update that runs again
//! (a retry, another engine resuming) ends with the same rules, made
//! once.

use ember_openstack::neutron::{Kind, Neutron, id_of};
use serde_json::{Map, Value, json};

use super::{present, security_group_ids};
use crate::resources::ResourceFailure;
use crate::resources::openstack::failure;

/// The protocols Heat allows by name (numbers 0–255 are allowed too).
pub const PROTOCOL_NAMES: [&str; 22] = [
    "ah",
    "dccp",
    "egp",
    "esp",
    "gre",
    "icmp",
    "icmpv6",
    "igmp",
    "ipv6-encap",
    "ipv6-frag",
    "ipv6-icmp",
    "ipv6-nonxt",
    "ipv6-opts",
    "ipv6-route",
    "ospf",
    "pgm",
    "rsvp",
    "sctp",
    "tcp",
    "udp",
    "udplite",
    "vrrp",
];

/// One rule of a group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rule {
    pub direction: String,
    pub ethertype: String,
    /// `None`: every protocol.
    pub protocol: Option<String>,
    pub port_range_min: Option<i64>,
    pub port_range_max: Option<i64>,
    pub remote_ip_prefix: Option<String>,
    /// A group's id — or, before [`resolve_remote_groups`], its name.
    pub remote_group_id: Option<String>,
    pub description: Option<String>,
}

/// What two rules are compared by (Heat's `_COMPARABLE_RULE_KEYS`, the
/// group being the same): values as text, as Heat stringifies them.
pub type RuleKey = [Option<String>; 7];

impl Rule {
    /// A rule in `direction` for `ethertype`, matching everything.
    pub fn open(direction: &str, ethertype: &str) -> Rule {
        Rule {
            direction: direction.to_owned(),
            ethertype: ethertype.to_owned(),
            protocol: None,
            port_range_min: None,
            port_range_max: None,
            remote_ip_prefix: None,
            remote_group_id: None,
            description: None,
        }
    }

    pub fn key(&self) -> RuleKey {
        [
            Some(self.direction.clone()),
            Some(self.ethertype.clone()),
            self.protocol.clone(),
            self.port_range_min.map(|port| port.to_string()),
            self.port_range_max.map(|port| port.to_string()),
            self.remote_group_id.clone(),
            self.remote_ip_prefix.clone(),
        ]
    }

    /// The rule as Neutron shows it.
    pub fn from_neutron(rule: &Value) -> Rule {
        let text = |name: &str| rule.get(name).and_then(Value::as_str).map(str::to_owned);
        Rule {
            direction: text("direction").unwrap_or_default(),
            ethertype: text("ethertype").unwrap_or_default(),
            protocol: text("protocol"),
            port_range_min: rule.get("port_range_min").and_then(Value::as_i64),
            port_range_max: rule.get("port_range_max").and_then(Value::as_i64),
            remote_ip_prefix: text("remote_ip_prefix"),
            remote_group_id: text("remote_group_id"),
            description: text("description").filter(|description| !description.is_empty()),
        }
    }

    /// Neutron's create body for the rule in `security_group_id`.
    pub fn body(&self, security_group_id: &str) -> Map<String, Value> {
        let mut body = Map::new();
        body.insert("security_group_id".to_owned(), json!(security_group_id));
        body.insert("direction".to_owned(), json!(self.direction));
        body.insert("ethertype".to_owned(), json!(self.ethertype));
        body.insert("protocol".to_owned(), json!(self.protocol));
        body.insert("port_range_min".to_owned(), json!(self.port_range_min));
        body.insert("port_range_max".to_owned(), json!(self.port_range_max));
        body.insert("remote_ip_prefix".to_owned(), json!(self.remote_ip_prefix));
        body.insert("remote_group_id".to_owned(), json!(self.remote_group_id));
        if let Some(description) = &self.description {
            body.insert("description".to_owned(), json!(description));
        }
        body
    }
}

/// The rules of an `OS::Neutron::SecurityGroup` (its `rules` entries) with
/// Heat's defaults: ingress, IPv4, `remote_mode: remote_ip_prefix`; with
/// `remote_mode: remote_group_id` and no group, the group itself
/// (`own_id`).
pub fn group_rules(
    entries: &[&Map<String, Value>],
    own_id: &str,
) -> Result<Vec<Rule>, ResourceFailure> {
    let mut rules = Vec::with_capacity(entries.len());
    for (index, entry) in entries.iter().enumerate() {
        let at = |key: &str| format!("rules[{index}].{key}");
        if let Some(unknown) = entry.keys().find(|key| {
            !matches!(
                key.as_str(),
                "direction"
                    | "ethertype"
                    | "port_range_min"
                    | "port_range_max"
                    | "protocol"
                    | "remote_mode"
                    | "remote_group_id"
                    | "remote_ip_prefix"
                    | "description"
            )
        }) {
            return Err(ResourceFailure::new(format!(
                "rules[{index}]: unknown key {unknown:?}"
            )));
        }
        let mut rule = Rule::open(
            &one_of(entry, "direction", &at("direction"), &["ingress", "egress"])?
                .unwrap_or_else(|| "ingress".to_owned()),
            &one_of(entry, "ethertype", &at("ethertype"), &["IPv4", "IPv6"])?
                .unwrap_or_else(|| "IPv4".to_owned()),
        );
        rule.protocol = protocol(entry, "protocol", &at("protocol"))?;
        rule.port_range_min = port(entry, "port_range_min", &at("port_range_min"))?;
        rule.port_range_max = port(entry, "port_range_max", &at("port_range_max"))?;
        rule.description = text_of(entry, "description");
        let remote_mode = one_of(
            entry,
            "remote_mode",
            &at("remote_mode"),
            &["remote_ip_prefix", "remote_group_id"],
        )?;
        if remote_mode.as_deref() == Some("remote_group_id") {
            rule.remote_group_id =
                Some(text_of(entry, "remote_group_id").unwrap_or_else(|| own_id.to_owned()));
        } else {
            rule.remote_ip_prefix = text_of(entry, "remote_ip_prefix");
        }
        rules.push(rule);
    }
    Ok(rules)
}

/// The rules a group keeps when none of `rules` is an egress rule:
/// Neutron's defaults, everything out over IPv4 and IPv6 (Heat's
/// `default_egress_rules`).
pub fn with_default_egress(mut rules: Vec<Rule>) -> Vec<Rule> {
    if !rules.iter().any(|rule| rule.direction == "egress") {
        rules.push(Rule::open("egress", "IPv4"));
        rules.push(Rule::open("egress", "IPv6"));
    }
    rules
}

/// Replaces each remote group given by name with its id (a group of the
/// acting project, as Heat's `get_secgroup_uuids` finds it).
pub async fn resolve_remote_groups(
    neutron: &Neutron,
    project_id: &str,
    rules: &mut [Rule],
) -> Result<(), ResourceFailure> {
    for rule in rules.iter_mut() {
        if let Some(group) = &rule.remote_group_id {
            let ids = security_group_ids(neutron, project_id, std::slice::from_ref(group)).await?;
            rule.remote_group_id = ids.into_iter().next();
        }
    }
    Ok(())
}

/// Makes `desired` exactly the rules of the group `security_group_id`:
/// the ones it has and does not want are deleted (gone already is fine),
/// the missing ones made (one made meanwhile — 409 — is fine).
pub async fn reconcile(
    neutron: &Neutron,
    security_group_id: &str,
    desired: &[Rule],
) -> Result<(), ResourceFailure> {
    let present = neutron
        .list(
            Kind::SecurityGroupRule,
            &[("security_group_id", security_group_id)],
        )
        .await
        .map_err(failure)?;
    let desired_keys: Vec<RuleKey> = desired.iter().map(Rule::key).collect();
    let mut present_keys = Vec::with_capacity(present.len());
    for rule in &present {
        let key = Rule::from_neutron(rule).key();
        if desired_keys.contains(&key) {
            present_keys.push(key);
        } else {
            let id = id_of(rule).map_err(failure)?;
            neutron
                .delete(Kind::SecurityGroupRule, &id)
                .await
                .map_err(failure)?;
        }
    }
    for rule in desired {
        let key = rule.key();
        if present_keys.contains(&key) {
            continue;
        }
        match neutron
            .create(Kind::SecurityGroupRule, rule.body(security_group_id), &[])
            .await
        {
            Ok(_) => {}
            Err(error) if error.is_conflict() => {}
            Err(error) => return Err(failure(error)),
        }
        present_keys.push(key);
    }
    Ok(())
}

/// A text entry, if given.
pub fn text_of(entry: &Map<String, Value>, key: &str) -> Option<String> {
    match present(entry, key)? {
        Value::String(text) => Some(text.clone()),
        other => Some(other.to_string()),
    }
}

/// A text entry that must be one of `allowed`; `at` names it in errors.
pub fn one_of(
    entry: &Map<String, Value>,
    key: &str,
    at: &str,
    allowed: &[&str],
) -> Result<Option<String>, ResourceFailure> {
    match text_of(entry, key) {
        Some(value) if !allowed.contains(&value.as_str()) => Err(ResourceFailure::new(format!(
            "{at}: {value:?} is not one of {}",
            allowed.join(", ")
        ))),
        value => Ok(value),
    }
}

/// A port number entry (0–65535; numbers given as text are numbers).
pub fn port(
    entry: &Map<String, Value>,
    key: &str,
    at: &str,
) -> Result<Option<i64>, ResourceFailure> {
    let Some(given) = text_of(entry, key) else {
        return Ok(None);
    };
    match given.trim().parse::<i64>() {
        Ok(port) if (0..=65535).contains(&port) => Ok(Some(port)),
        Ok(port) => Err(ResourceFailure::new(format!(
            "{at}: {port} is outside the range 0-65535"
        ))),
        Err(_) => Err(ResourceFailure::new(format!(
            "{at}: {given:?} is not an integer"
        ))),
    }
}

/// A protocol entry: a name Heat allows or a number 0–255.
pub fn protocol(
    entry: &Map<String, Value>,
    key: &str,
    at: &str,
) -> Result<Option<String>, ResourceFailure> {
    let Some(given) = text_of(entry, key) else {
        return Ok(None);
    };
    let numbered = given.parse::<u16>().is_ok_and(|number| number <= 255);
    if numbered || PROTOCOL_NAMES.contains(&given.as_str()) {
        Ok(Some(given))
    } else {
        Err(ResourceFailure::new(format!(
            "{at}: {given:?} is not one of {} or a number 0-255",
            PROTOCOL_NAMES.join(", ")
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::openstack::neutron::fields;

    fn entries(value: Value) -> Vec<Map<String, Value>> {
        value
            .as_array()
            .expect("a list")
            .iter()
            .map(|entry| fields(entry.clone()))
            .collect()
    }

    fn normalised(value: Value) -> Result<Vec<Rule>, ResourceFailure> {
        let entries = entries(value);
        let borrowed: Vec<&Map<String, Value>> = entries.iter().collect();
        group_rules(&borrowed, "own-group")
    }

    #[test]
    fn rules_take_heats_defaults_and_remote_modes() {
        let rules = normalised(json!([
            {"protocol": "tcp", "port_range_min": "22", "port_range_max": 22, "remote_ip_prefix": "10.0.0.0/8"},
            {"remote_mode": "remote_group_id", "protocol": 6},
            {"remote_mode": "remote_group_id", "remote_group_id": "web", "remote_ip_prefix": "ignored/0"},
            {"direction": "egress", "ethertype": "IPv6", "description": "out"},
        ]))
        .expect("rules");
        assert_eq!(
            rules[0],
            Rule {
                protocol: Some("tcp".to_owned()),
                port_range_min: Some(22),
                port_range_max: Some(22),
                remote_ip_prefix: Some("10.0.0.0/8".to_owned()),
                ..Rule::open("ingress", "IPv4")
            }
        );
        assert_eq!(
            rules[1].remote_group_id.as_deref(),
            Some("own-group"),
            "a group referring to itself"
        );
        assert_eq!(rules[1].protocol.as_deref(), Some("6"));
        assert_eq!(rules[2].remote_group_id.as_deref(), Some("web"));
        assert_eq!(
            rules[2].remote_ip_prefix, None,
            "the prefix is dropped in group mode"
        );
        assert_eq!(rules[3].direction, "egress");
        assert_eq!(rules[3].description.as_deref(), Some("out"));
    }

    #[test]
    fn bad_rules_are_named_by_their_place() {
        let message = |value| normalised(value).expect_err("invalid").to_string();
        assert_eq!(
            message(json!([{}, {"direction": "sideways"}])),
            "rules[1].direction: \"sideways\" is not one of ingress, egress"
        );
        assert_eq!(
            message(json!([{"port_range_min": 70000}])),
            "rules[0].port_range_min: 70000 is outside the range 0-65535"
        );
        assert!(
            message(json!([{"protocol": "smoke"}]))
                .starts_with("rules[0].protocol: \"smoke\" is not one of ah,")
        );
        assert_eq!(
            message(json!([{"colour": 1}])),
            "rules[0]: unknown key \"colour\""
        );
    }

    #[test]
    fn a_rule_neutron_shows_matches_the_one_asked_for() {
        let asked = normalised(json!([{"protocol": "tcp", "port_range_min": 80, "port_range_max": 80, "remote_ip_prefix": "0.0.0.0/0"}]))
            .expect("rules")
            .remove(0);
        let shown = json!({
            "id": "r1", "security_group_id": "g", "direction": "ingress", "ethertype": "IPv4",
            "protocol": "tcp", "port_range_min": 80, "port_range_max": 80,
            "remote_ip_prefix": "0.0.0.0/0", "remote_group_id": null, "description": "",
        });
        assert_eq!(Rule::from_neutron(&shown).key(), asked.key());
        let body = asked.body("g");
        assert_eq!(body["security_group_id"], json!("g"));
        assert_eq!(body["port_range_min"], json!(80));
        assert_eq!(body["remote_group_id"], Value::Null);
        assert!(
            !body.contains_key("description"),
            "no description: none sent"
        );
    }

    #[test]
    fn default_egress_stays_unless_an_egress_rule_is_given() {
        let ingress = vec![Rule::open("ingress", "IPv4")];
        let kept = with_default_egress(ingress.clone());
        assert_eq!(kept.len(), 3);
        assert!(kept.contains(&Rule::open("egress", "IPv6")));
        let egress = vec![Rule {
            protocol: Some("udp".to_owned()),
            ..Rule::open("egress", "IPv4")
        }];
        assert_eq!(with_default_egress(egress.clone()), egress);
    }
}
