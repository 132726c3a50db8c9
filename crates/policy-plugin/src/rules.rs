//! The policy: rules read once from a TOML file at start-up and validated
//! there, so a mistake stops the plugin with a message naming the key rather
//! than surfacing later as a surprising verdict.
//!
//! ```toml
//! listen = "127.0.0.1:7070"                   # optional; --listen wins
//! operations = ["create", "update", "adopt"]  # the default
//! allowed_types = ["OS::Nova::Server", "OS::Heat::ResourceGroup"]  # optional
//!
//! [[max_resources]]
//! type = "OS::Nova::Server"
//! limit = 100
//! verdict = "deny"          # or "warn"; default "deny"
//!
//! [[required_properties]]
//! type = "OS::Nova::Server"
//! property = "security_groups"
//! verdict = "deny"
//! ```

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::path::Path;

use figment::Figment;
use figment::providers::{Format, Toml};
use serde::Deserialize;

use crate::error::{Error, Result};

/// Stack operations, by the names the rules file uses.
pub const OPERATION_NAMES: [&str; 11] = [
    "create", "update", "delete", "abandon", "adopt", "check", "suspend", "resume", "rollback",
    "lock", "unlock",
];

/// Operations checked when the file does not say: the ones that bring
/// resources into a stack. Delete must never be blocked by a size rule.
pub const DEFAULT_OPERATIONS: [&str; 3] = ["create", "update", "adopt"];

/// What breaking a rule does to the operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RuleVerdict {
    /// Stop the operation.
    #[default]
    Deny,
    /// Let it go on, with a warning event.
    Warn,
}

/// At most `limit` resources of `resource_type` in the whole stack tree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MaxResources {
    pub resource_type: String,
    pub limit: u32,
    pub verdict: RuleVerdict,
}

/// Every resource of `resource_type` must set `property`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequiredProperty {
    pub resource_type: String,
    pub property: String,
    pub verdict: RuleVerdict,
}

/// The validated rules.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Policy {
    /// Where to listen, if the file says.
    pub listen: Option<SocketAddr>,
    /// Operations the rules are checked for; others are allowed unchecked.
    pub operations: BTreeSet<String>,
    /// `None`: every type is allowed.
    pub allowed_types: Option<BTreeSet<String>>,
    pub max_resources: Vec<MaxResources>,
    pub required_properties: Vec<RequiredProperty>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RulesFile {
    listen: Option<String>,
    operations: Option<Vec<String>>,
    allowed_types: Option<Vec<String>>,
    #[serde(default)]
    max_resources: Vec<MaxResourcesEntry>,
    #[serde(default)]
    required_properties: Vec<RequiredPropertyEntry>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct MaxResourcesEntry {
    #[serde(rename = "type")]
    resource_type: String,
    limit: u32,
    #[serde(default)]
    verdict: RuleVerdict,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RequiredPropertyEntry {
    #[serde(rename = "type")]
    resource_type: String,
    property: String,
    #[serde(default)]
    verdict: RuleVerdict,
}

impl Policy {
    /// Reads and validates the rules file at `path`.
    pub fn load(path: &Path) -> Result<Policy> {
        let source = path.display().to_string();
        if !path.is_file() {
            return Err(Error::RulesFile {
                path: source,
                reason: "no such file".to_owned(),
            });
        }
        Policy::from_figment(Figment::from(Toml::file_exact(path)), &source)
    }

    /// Parses and validates rules given as TOML text.
    pub fn from_toml(text: &str) -> Result<Policy> {
        Policy::from_figment(Figment::from(Toml::string(text)), "<inline>")
    }

    fn from_figment(figment: Figment, source: &str) -> Result<Policy> {
        let file: RulesFile = figment.extract().map_err(|error| Error::RulesFile {
            path: source.to_owned(),
            reason: describe_figment_error(error),
        })?;
        let mut problems = Vec::new();
        let policy = validate(file, &mut problems);
        if problems.is_empty() {
            Ok(policy)
        } else {
            Err(Error::InvalidRules {
                path: source.to_owned(),
                problems,
            })
        }
    }
}

/// Checks everything serde cannot, collecting one problem per bad key.
fn validate(file: RulesFile, problems: &mut Vec<String>) -> Policy {
    let listen = file.listen.and_then(|text| match text.parse() {
        Ok(address) => Some(address),
        Err(_) => {
            problems.push(format!(
                "listen: {text:?} is not an address like 127.0.0.1:7070"
            ));
            None
        }
    });

    let mut operations = BTreeSet::new();
    let named = file
        .operations
        .unwrap_or_else(|| DEFAULT_OPERATIONS.map(str::to_owned).to_vec());
    if named.is_empty() {
        problems.push(
            "operations: an empty list checks nothing; remove the key for the default (create, update, adopt)"
                .to_owned(),
        );
    }
    for (index, name) in named.iter().enumerate() {
        let lowercase = name.trim().to_ascii_lowercase();
        if OPERATION_NAMES.contains(&lowercase.as_str()) {
            operations.insert(lowercase);
        } else {
            problems.push(format!(
                "operations[{index}]: unknown operation {name:?}; use {}",
                OPERATION_NAMES.join(", ")
            ));
        }
    }

    let allowed_types = file.allowed_types.map(|types| {
        if types.is_empty() {
            problems.push(
                "allowed_types: an empty list denies every resource; remove the key to allow every type"
                    .to_owned(),
            );
        }
        for (index, resource_type) in types.iter().enumerate() {
            check_type(&format!("allowed_types[{index}]"), resource_type, problems);
        }
        types.into_iter().collect::<BTreeSet<_>>()
    });

    let mut limited_types = BTreeSet::new();
    for (index, entry) in file.max_resources.iter().enumerate() {
        let key = format!("max_resources[{index}].type");
        check_type(&key, &entry.resource_type, problems);
        if !limited_types.insert(entry.resource_type.as_str()) {
            problems.push(format!(
                "{key}: {:?} already has a limit in an earlier [[max_resources]]",
                entry.resource_type
            ));
        }
    }
    for (index, entry) in file.required_properties.iter().enumerate() {
        check_type(
            &format!("required_properties[{index}].type"),
            &entry.resource_type,
            problems,
        );
        if entry.property.trim().is_empty() {
            problems.push(format!(
                "required_properties[{index}].property: must name a property, e.g. \"security_groups\""
            ));
        }
    }

    Policy {
        listen,
        operations,
        allowed_types,
        max_resources: file
            .max_resources
            .into_iter()
            .map(|entry| MaxResources {
                resource_type: entry.resource_type,
                limit: entry.limit,
                verdict: entry.verdict,
            })
            .collect(),
        required_properties: file
            .required_properties
            .into_iter()
            .map(|entry| RequiredProperty {
                resource_type: entry.resource_type,
                property: entry.property,
                verdict: entry.verdict,
            })
            .collect(),
    }
}

fn check_type(key: &str, resource_type: &str, problems: &mut Vec<String>) {
    if resource_type.trim().is_empty() {
        problems.push(format!(
            "{key}: must name a resource type, e.g. \"OS::Nova::Server\""
        ));
    }
}

/// One line per figment error, each naming its key (`max_resources[0].limit`).
fn describe_figment_error(error: figment::Error) -> String {
    error
        .into_iter()
        .map(|error| {
            let key = error.path.iter().fold(String::new(), |mut key, segment| {
                if segment.parse::<usize>().is_ok() {
                    key.push_str(&format!("[{segment}]"));
                } else {
                    if !key.is_empty() {
                        key.push('.');
                    }
                    key.push_str(segment);
                }
                key
            });
            if key.is_empty() {
                error.kind.to_string()
            } else {
                format!("{key}: {}", error.kind)
            }
        })
        .collect::<Vec<_>>()
        .join("; ")
}

#[cfg(test)]
mod tests {
    use super::*;

    const EXAMPLE: &str = r#"
        listen = "127.0.0.1:7171"
        operations = ["create", "UPDATE"]
        allowed_types = ["OS::Nova::Server", "OS::Heat::ResourceGroup"]

        [[max_resources]]
        type = "OS::Nova::Server"
        limit = 100

        [[max_resources]]
        type = "OS::Heat::ResourceGroup"
        limit = 5
        verdict = "warn"

        [[required_properties]]
        type = "OS::Nova::Server"
        property = "security_groups"
    "#;

    fn problems_of(text: &str) -> String {
        Policy::from_toml(text).expect_err("refused").to_string()
    }

    #[test]
    fn the_example_parses_with_defaults_filled_in() {
        let policy = Policy::from_toml(EXAMPLE).expect("valid");
        assert_eq!(policy.listen, Some("127.0.0.1:7171".parse().expect("addr")));
        assert_eq!(
            policy.operations,
            BTreeSet::from(["create".to_owned(), "update".to_owned()])
        );
        assert_eq!(policy.allowed_types.as_ref().map(BTreeSet::len), Some(2));
        assert_eq!(
            policy.max_resources[0],
            MaxResources {
                resource_type: "OS::Nova::Server".into(),
                limit: 100,
                verdict: RuleVerdict::Deny,
            }
        );
        assert_eq!(policy.max_resources[1].verdict, RuleVerdict::Warn);
        assert_eq!(policy.required_properties[0].property, "security_groups");
    }

    #[test]
    fn an_empty_file_checks_creates_updates_and_adopts_and_allows_every_type() {
        let policy = Policy::from_toml("").expect("valid");
        assert_eq!(policy.operations.len(), 3);
        assert!(policy.operations.contains("adopt"));
        assert!(policy.allowed_types.is_none());
        assert!(policy.max_resources.is_empty() && policy.required_properties.is_empty());
    }

    #[test]
    fn an_unknown_key_is_named_with_its_position() {
        let message = problems_of("[[max_resources]]\ntype = \"OS::Nova::Server\"\nlimt = 3\n");
        assert!(message.contains("max_resources[0]"), "{message}");
        assert!(message.contains("limt"), "{message}");
        let message = problems_of("max_resource = 3\n");
        assert!(message.contains("max_resource"), "{message}");
    }

    #[test]
    fn bad_values_name_their_key() {
        for (text, key) in [
            (
                "[[max_resources]]\ntype = \"OS::Nova::Server\"\nlimit = -1\n",
                "max_resources[0].limit",
            ),
            (
                "[[max_resources]]\ntype = \"OS::Nova::Server\"\nlimit = \"ten\"\n",
                "max_resources[0].limit",
            ),
            (
                "[[max_resources]]\ntype = \"OS::Nova::Server\"\nlimit = 1\nverdict = \"block\"\n",
                "max_resources[0].verdict",
            ),
            ("[[max_resources]]\nlimit = 1\n", "max_resources[0]"),
            (
                "[[required_properties]]\ntype = \"OS::Nova::Server\"\nproperty = \"\"\n",
                "required_properties[0].property",
            ),
            (
                "[[required_properties]]\ntype = \"\"\nproperty = \"image\"\n",
                "required_properties[0].type",
            ),
            ("allowed_types = []\n", "allowed_types"),
            ("allowed_types = \"OS::Nova::Server\"\n", "allowed_types"),
            ("operations = [\"create\", \"launch\"]\n", "operations[1]"),
            ("operations = []\n", "operations"),
            ("listen = \"localhost\"\n", "listen"),
        ] {
            let message = problems_of(text);
            assert!(message.contains(key), "{key} missing from: {message}");
        }
    }

    #[test]
    fn two_limits_for_one_type_are_refused() {
        let message = problems_of(
            "[[max_resources]]\ntype = \"OS::Nova::Server\"\nlimit = 1\n\
             [[max_resources]]\ntype = \"OS::Nova::Server\"\nlimit = 2\n",
        );
        assert!(message.contains("max_resources[1].type"), "{message}");
        assert!(message.contains("already has a limit"), "{message}");
    }

    #[test]
    fn every_problem_is_reported_at_once() {
        let message = problems_of("listen = \"nowhere\"\noperations = [\"explode\"]\n");
        assert!(message.contains("listen:"), "{message}");
        assert!(message.contains("operations[0]:"), "{message}");
    }

    #[test]
    fn broken_toml_and_missing_files_are_reported_with_the_file() {
        let message = problems_of("[[max_resources]\n");
        assert!(message.starts_with("rules file <inline>"), "{message}");
        let error = Policy::load(Path::new("/nonexistent/rules.toml")).expect_err("missing");
        assert_eq!(
            error.to_string(),
            "rules file /nonexistent/rules.toml: no such file"
        );
    }

    #[test]
    fn a_file_on_disk_loads() {
        let directory = tempfile::tempdir().expect("dir");
        let path = directory.path().join("rules.toml");
        std::fs::write(&path, EXAMPLE).expect("written");
        assert_eq!(
            Policy::load(&path).expect("valid"),
            Policy::from_toml(EXAMPLE).expect("valid")
        );
        std::fs::write(&path, "[[max_resources]]\ntype = \"X\"\nlimit = true\n").expect("written");
        let message = Policy::load(&path).expect_err("invalid").to_string();
        assert!(message.contains(&path.display().to_string()), "{message}");
        assert!(message.contains("max_resources[0].limit"), "{message}");
    }
}
