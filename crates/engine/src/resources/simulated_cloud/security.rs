//! Security groups and their rules on the simulated cloud, read with the
//! openstack types' own rule parsing (Heat's defaults, the default egress
//! rules, remote groups by name), so a template's mistakes are refused in
//! the same words on both backends.

use serde_json::{Map, Value, json};

use super::{Made, Make, entries};
use crate::cloud::simulated::{Kind, World};
use crate::domain::Resource;
use crate::resources::ResourceFailure;
use crate::resources::openstack::neutron::aws_security_group::desired_rules;
use crate::resources::openstack::neutron::rules::{Rule, group_rules, with_default_egress};

/// `OS::Neutron::SecurityGroup`.
pub(super) fn group(make: &mut Make<'_>) -> Result<Made, ResourceFailure> {
    if make.text("name").as_deref() == Some("default") {
        return Err(ResourceFailure::new(
            "Security groups cannot be assigned the name \"default\".".to_owned(),
        ));
    }
    let id = make.id("security_group");
    let existing = make.existing(&id);
    let rules = with_default_egress(group_rules(&entries(make.properties(), "rules"), &id)?);
    let name = make.name("name", existing.as_ref());
    let description = make.text("description").unwrap_or_default();
    let stateful = make.flag("stateful").unwrap_or(true);
    make_group(make, &id, &name, &description, stateful, rules)
}

/// `AWS::EC2::SecurityGroup`: named after the resource, rules from its
/// ingress and egress lists.
pub(super) fn aws_group(make: &mut Make<'_>) -> Result<Made, ResourceFailure> {
    let id = make.id("security_group");
    let existing = make.existing(&id);
    let rules = desired_rules(make.properties())?;
    let name = match &existing {
        Some(object) => object.name().to_owned(),
        None => make.request.physical_resource_name(),
    };
    let description = make.text("GroupDescription").unwrap_or_default();
    make_group(make, &id, &name, &description, true, rules)
}

fn make_group(
    make: &mut Make<'_>,
    id: &str,
    name: &str,
    description: &str,
    stateful: bool,
    mut rules: Vec<Rule>,
) -> Result<Made, ResourceFailure> {
    for rule in &mut rules {
        if let Some(remote) = rule.remote_group_id.clone() {
            rule.remote_group_id = Some(if remote == id {
                remote
            } else {
                make.find(Kind::SecurityGroup, &remote)?
            });
        }
    }
    let project = make.project().to_owned();
    let rules: Vec<Value> = rules
        .iter()
        .enumerate()
        .map(|(index, rule)| {
            let mut fields = rule.body(id);
            fields.insert(
                "id".to_owned(),
                json!(make.id(&format!("security_group_rule {index}"))),
            );
            fields.insert("tenant_id".to_owned(), json!(project));
            Value::Object(fields)
        })
        .collect();
    let mut fields = Map::new();
    fields.insert("name".to_owned(), json!(name));
    fields.insert("description".to_owned(), json!(description));
    fields.insert("tenant_id".to_owned(), json!(project));
    fields.insert("project_id".to_owned(), json!(project));
    fields.insert("stateful".to_owned(), json!(stateful));
    fields.insert("tags".to_owned(), json!([]));
    fields.insert("security_group_rules".to_owned(), json!(rules));
    // Rules added by `SecurityGroupRule` resources stay: those whose ids
    // are not the group's own.
    if let Some(existing) = make.existing(id) {
        let previous = existing
            .fields
            .get("security_group_rules")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        let own: Vec<String> = (0..previous.len())
            .map(|index| make.id(&format!("security_group_rule {index}")))
            .collect();
        let added = previous.into_iter().filter(|rule| {
            rule.get("id")
                .and_then(Value::as_str)
                .is_some_and(|rule| !own.iter().any(|own| own == rule))
        });
        if let Some(list) = fields
            .get_mut("security_group_rules")
            .and_then(Value::as_array_mut)
        {
            list.extend(added);
        }
    }
    make.insert(id, Kind::SecurityGroup, fields.clone());
    Ok(Made::object(id, fields))
}

/// `OS::Neutron::SecurityGroupRule`: one rule added to a group.
pub(super) fn rule(make: &mut Make<'_>) -> Result<Made, ResourceFailure> {
    let group = make
        .text("security_group")
        .ok_or_else(|| ResourceFailure::new("Property security_group not assigned".to_owned()))?;
    let group_id = make.find(Kind::SecurityGroup, &group)?;
    let mut entry = Map::new();
    for key in [
        "direction",
        "ethertype",
        "port_range_min",
        "port_range_max",
        "protocol",
        "remote_ip_prefix",
        "description",
    ] {
        if let Some(value) = make.properties().get(key).filter(|value| !value.is_null()) {
            entry.insert(key.to_owned(), value.clone());
        }
    }
    if let Some(remote) = make.text("remote_group") {
        entry.insert("remote_mode".to_owned(), json!("remote_group_id"));
        entry.insert("remote_group_id".to_owned(), json!(remote));
    }
    let mut rule = group_rules(&[&entry], &group_id)?
        .pop()
        .ok_or_else(|| ResourceFailure::new("no rule".to_owned()))?;
    if let Some(remote) = rule.remote_group_id.clone()
        && remote != group_id
    {
        rule.remote_group_id = Some(make.find(Kind::SecurityGroup, &remote)?);
    }
    let id = make.id("security_group_rule");
    let project = make.project().to_owned();
    let fields = make
        .world
        .fields_mut(&group_id)
        .ok_or_else(|| ResourceFailure::new(format!("Security group {group_id} does not exist")))?;
    let same = fields
        .get("security_group_rules")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .find(|other| Rule::from_neutron(other).key() == rule.key())
        .and_then(|other| other.get("id").and_then(Value::as_str))
        .map(str::to_owned);
    match same {
        Some(same) if same == id => {}
        Some(same) => {
            return Err(ResourceFailure::new(format!(
                "Security group rule already exists. Rule id is {same}."
            )));
        }
        None => {
            let mut body = rule.body(&group_id);
            body.insert("id".to_owned(), json!(id));
            body.insert("tenant_id".to_owned(), json!(project));
            let rules = fields
                .entry("security_group_rules")
                .or_insert_with(|| json!([]));
            if let Some(rules) = rules.as_array_mut() {
                rules.push(Value::Object(body));
            }
        }
    }
    let mut shown = rule.body(&group_id);
    shown.insert("id".to_owned(), json!(id));
    Ok(Made::object(&id, shown).with_data("security_group", json!(group_id)))
}

/// Takes a `SecurityGroupRule`'s rule out of its group (a group gone
/// took it already).
pub(super) fn remove_rule(world: &mut World, current: &Resource) -> Result<(), ResourceFailure> {
    let (Some(group), Some(id)) = (
        current.data.get("security_group").and_then(Value::as_str),
        current.physical_id.as_deref(),
    ) else {
        return Ok(());
    };
    if let Some(rules) = world
        .fields_mut(group)
        .and_then(|fields| fields.get_mut("security_group_rules"))
        .and_then(Value::as_array_mut)
    {
        rules.retain(|rule| rule.get("id").and_then(Value::as_str) != Some(id));
    }
    Ok(())
}
