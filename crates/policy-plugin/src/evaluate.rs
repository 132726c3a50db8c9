//! Applying the policy to a stack tree: pure, so every rule is tested
//! without a server. Counts and checks span the root stack and all of its
//! nested stacks, since a limit of 100 servers means 100 in the deployment,
//! however the template nests them.

use std::collections::BTreeMap;

use crate::rules::{Policy, RuleVerdict};
use crate::snapshot::{ResourceView, StackView};

/// How many offending resources a message names before "and N more".
const NAMED_OFFENDERS: usize = 5;

/// The plugin's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    Allow,
    /// Go on; the messages, joined with "; ".
    Warn(String),
    /// Stop; the violated rules, joined with "; ".
    Deny(String),
}

/// Decides `operation` (a lowercase name such as "create") on `stack`.
pub fn evaluate(policy: &Policy, operation: &str, stack: &StackView) -> Decision {
    if !policy.operations.contains(operation) {
        return Decision::Allow;
    }
    let mut resources = Vec::new();
    collect(stack, "", &mut resources);
    let mut denials = Vec::new();
    let mut warnings = Vec::new();
    let mut report = |verdict: RuleVerdict, message: String| match verdict {
        RuleVerdict::Deny => denials.push(message),
        RuleVerdict::Warn => warnings.push(message),
    };

    if let Some(allowed) = &policy.allowed_types {
        let mut forbidden: BTreeMap<&str, Vec<String>> = BTreeMap::new();
        for (path, resource) in &resources {
            if !allowed.contains(&resource.resource_type) {
                forbidden
                    .entry(resource.resource_type.as_str())
                    .or_default()
                    .push(path.clone());
            }
        }
        for (resource_type, paths) in forbidden {
            report(
                RuleVerdict::Deny,
                format!(
                    "resource type {resource_type} is not allowed ({})",
                    name_some(&paths)
                ),
            );
        }
    }

    for rule in &policy.max_resources {
        let existing = resources
            .iter()
            .filter(|(_, resource)| resource.resource_type == rule.resource_type)
            .count() as u64;
        // What the operation will bring (a group of 101 servers is 101
        // servers before any exists), else what the tree holds.
        let planned = stack.planned.get(&rule.resource_type).copied().unwrap_or(0);
        let count = existing.max(planned);
        if count > u64::from(rule.limit) {
            report(
                rule.verdict,
                format!(
                    "{count} {} resources (nested stacks included) exceed the limit of {}",
                    rule.resource_type, rule.limit
                ),
            );
        }
    }

    for rule in &policy.required_properties {
        let missing: Vec<String> = resources
            .iter()
            .filter(|(_, resource)| {
                resource.resource_type == rule.resource_type
                    && !resource.set_properties.contains(&rule.property)
            })
            .map(|(path, _)| path.clone())
            .collect();
        if !missing.is_empty() {
            report(
                rule.verdict,
                format!(
                    "{} {} resource{} without {}: {}",
                    missing.len(),
                    rule.resource_type,
                    if missing.len() == 1 { "" } else { "s" },
                    rule.property,
                    name_some(&missing)
                ),
            );
        }
    }

    if !denials.is_empty() {
        Decision::Deny(denials.join("; "))
    } else if !warnings.is_empty() {
        Decision::Warn(warnings.join("; "))
    } else {
        Decision::Allow
    }
}

/// Every resource in the tree with its path (`web/group/server_1`).
fn collect<'a>(stack: &'a StackView, parent: &str, into: &mut Vec<(String, &'a ResourceView)>) {
    let path = if parent.is_empty() {
        stack.name.clone()
    } else {
        format!("{parent}/{}", stack.name)
    };
    for resource in &stack.resources {
        into.push((format!("{path}/{}", resource.name), resource));
    }
    for nested in &stack.nested {
        collect(nested, &path, into);
    }
}

fn name_some(paths: &[String]) -> String {
    let named = paths
        .iter()
        .take(NAMED_OFFENDERS)
        .cloned()
        .collect::<Vec<_>>()
        .join(", ");
    match paths.len().checked_sub(NAMED_OFFENDERS) {
        Some(more) if more > 0 => format!("{named} and {more} more"),
        _ => named,
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;

    fn policy(text: &str) -> Policy {
        Policy::from_toml(text).expect("valid rules")
    }

    fn resource(name: &str, resource_type: &str, set: &[&str]) -> ResourceView {
        ResourceView {
            name: name.to_owned(),
            resource_type: resource_type.to_owned(),
            set_properties: set.iter().map(|p| (*p).to_owned()).collect::<BTreeSet<_>>(),
        }
    }

    fn servers(count: usize) -> Vec<ResourceView> {
        (0..count)
            .map(|index| resource(&format!("server_{index}"), "OS::Nova::Server", &["image"]))
            .collect()
    }

    /// `total` servers: half in the root stack, the rest in a nested group.
    fn stack_with_servers(total: usize) -> StackView {
        let in_root = total / 2;
        StackView {
            name: "web".into(),
            resources: servers(in_root),
            nested: vec![StackView {
                name: "group".into(),
                resources: servers(total - in_root),
                ..StackView::default()
            }],
            ..StackView::default()
        }
    }

    const LIMIT_100: &str =
        "[[max_resources]]\ntype = \"OS::Nova::Server\"\nlimit = 100\nverdict = \"deny\"\n";

    #[test]
    fn max_resources_counts_what_the_operation_will_bring() {
        // A create: one ResourceGroup exists in the template, its 101
        // servers only in the engine's planned count.
        let policy = policy(LIMIT_100);
        let mut stack = StackView {
            name: "web".into(),
            ..StackView::default()
        };
        stack.planned.insert("OS::Nova::Server".into(), 101);
        assert_eq!(
            evaluate(&policy, "create", &stack),
            Decision::Deny(
                "101 OS::Nova::Server resources (nested stacks included) exceed the limit of 100"
                    .into()
            )
        );
        stack.planned.insert("OS::Nova::Server".into(), 100);
        assert_eq!(evaluate(&policy, "create", &stack), Decision::Allow);
    }

    #[test]
    fn max_resources_counts_nested_stacks_and_denies_above_the_limit() {
        let policy = policy(LIMIT_100);
        assert_eq!(
            evaluate(&policy, "create", &stack_with_servers(100)),
            Decision::Allow
        );
        assert_eq!(
            evaluate(&policy, "create", &stack_with_servers(101)),
            Decision::Deny(
                "101 OS::Nova::Server resources (nested stacks included) exceed the limit of 100"
                    .into()
            )
        );
    }

    #[test]
    fn max_resources_in_warn_mode_warns() {
        let policy = policy(&LIMIT_100.replace("deny", "warn"));
        assert!(matches!(
            evaluate(&policy, "update", &stack_with_servers(150)),
            Decision::Warn(message) if message.starts_with("150 OS::Nova::Server")
        ));
    }

    #[test]
    fn rules_apply_only_to_the_configured_operations() {
        let policy = policy(LIMIT_100);
        let big = stack_with_servers(500);
        assert!(matches!(
            evaluate(&policy, "adopt", &big),
            Decision::Deny(_)
        ));
        assert_eq!(evaluate(&policy, "delete", &big), Decision::Allow);
        assert_eq!(evaluate(&policy, "lock", &big), Decision::Allow);
    }

    #[test]
    fn required_properties_name_the_resources_missing_them() {
        let policy = policy(
            "[[required_properties]]\ntype = \"OS::Nova::Server\"\nproperty = \"security_groups\"\n",
        );
        let mut stack = stack_with_servers(8);
        stack.resources[0]
            .set_properties
            .insert("security_groups".into());
        stack
            .resources
            .push(resource("volume", "OS::Cinder::Volume", &[]));
        let Decision::Deny(message) = evaluate(&policy, "create", &stack) else {
            panic!("expected a deny");
        };
        assert!(
            message.starts_with("7 OS::Nova::Server resources without security_groups: web/server_1, web/server_2, web/server_3, web/group/server_0, web/group/server_1 and 2 more"),
            "{message}"
        );
        for server in &mut stack.resources {
            server.set_properties.insert("security_groups".into());
        }
        for server in &mut stack.nested[0].resources {
            server.set_properties.insert("security_groups".into());
        }
        assert_eq!(evaluate(&policy, "create", &stack), Decision::Allow);
    }

    #[test]
    fn allowed_types_deny_anything_else_wherever_it_is() {
        let policy = policy("allowed_types = [\"OS::Nova::Server\"]\n");
        let mut stack = stack_with_servers(2);
        assert_eq!(evaluate(&policy, "create", &stack), Decision::Allow);
        stack.nested[0]
            .resources
            .push(resource("bucket", "OS::Swift::Container", &[]));
        assert_eq!(
            evaluate(&policy, "create", &stack),
            Decision::Deny(
                "resource type OS::Swift::Container is not allowed (web/group/bucket)".into()
            )
        );
    }

    #[test]
    fn denials_win_over_warnings_and_are_all_reported() {
        let policy = policy(
            "allowed_types = [\"OS::Nova::Server\"]\n\
             [[max_resources]]\ntype = \"OS::Nova::Server\"\nlimit = 1\n\
             [[required_properties]]\ntype = \"OS::Nova::Server\"\nproperty = \"flavor\"\nverdict = \"warn\"\n",
        );
        let mut stack = stack_with_servers(3);
        stack
            .resources
            .push(resource("net", "OS::Neutron::Net", &[]));
        let Decision::Deny(message) = evaluate(&policy, "create", &stack) else {
            panic!("expected a deny");
        };
        assert!(
            message.contains("OS::Neutron::Net is not allowed"),
            "{message}"
        );
        assert!(
            message.contains("3 OS::Nova::Server resources"),
            "{message}"
        );
        assert!(
            !message.contains("flavor"),
            "warnings are not reasons: {message}"
        );
    }

    #[test]
    fn an_empty_policy_allows_everything() {
        assert_eq!(
            evaluate(&policy(""), "create", &stack_with_servers(1000)),
            Decision::Allow
        );
    }
}
