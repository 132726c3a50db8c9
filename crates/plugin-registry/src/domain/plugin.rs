//! A registered lifecycle plugin and its validation.

use chrono::{DateTime, Utc};

use super::circuit::{BreakerSettings, CircuitRecord};
use crate::error::{Error, Result};

/// Stack operations a plugin can be called for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Operation {
    Create,
    Update,
    Delete,
    Abandon,
    Adopt,
    Check,
    Suspend,
    Resume,
    Rollback,
    Lock,
    Unlock,
}

impl Operation {
    pub const ALL: [Operation; 11] = [
        Operation::Create,
        Operation::Update,
        Operation::Delete,
        Operation::Abandon,
        Operation::Adopt,
        Operation::Check,
        Operation::Suspend,
        Operation::Resume,
        Operation::Rollback,
        Operation::Lock,
        Operation::Unlock,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Operation::Create => "create",
            Operation::Update => "update",
            Operation::Delete => "delete",
            Operation::Abandon => "abandon",
            Operation::Adopt => "adopt",
            Operation::Check => "check",
            Operation::Suspend => "suspend",
            Operation::Resume => "resume",
            Operation::Rollback => "rollback",
            Operation::Lock => "lock",
            Operation::Unlock => "unlock",
        }
    }

    pub fn parse(text: &str) -> Option<Operation> {
        Operation::ALL
            .into_iter()
            .find(|operation| operation.as_str().eq_ignore_ascii_case(text))
    }
}

/// What happens when a plugin denies, errors or times out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FailureMode {
    /// Stop the chain and fail the operation.
    #[default]
    Fail,
    /// Record an event and continue.
    Warn,
}

impl FailureMode {
    pub fn as_str(self) -> &'static str {
        match self {
            FailureMode::Fail => "FAIL",
            FailureMode::Warn => "WARN",
        }
    }

    pub fn parse(text: &str) -> Option<FailureMode> {
        match text.to_ascii_uppercase().as_str() {
            "FAIL" => Some(FailureMode::Fail),
            "WARN" => Some(FailureMode::Warn),
            _ => None,
        }
    }
}

/// A plugin in the registry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plugin {
    pub name: String,
    pub endpoint: String,
    pub ordinal: i32,
    /// Empty means every operation.
    pub operations: Vec<Operation>,
    /// Empty means every project.
    pub project_ids: Vec<String>,
    pub failure_mode: FailureMode,
    pub timeout_ms: u32,
    pub enabled: bool,
    /// `false`: observe mode — called, its verdicts recorded, never
    /// enforced (a deny or a failure does not stop the chain).
    pub enforce: bool,
    pub breaker: BreakerSettings,
    /// Its recent failures and circuit, as the registry last recorded them.
    pub circuit: CircuitRecord,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

/// A registration request before validation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewPlugin {
    pub name: String,
    pub endpoint: String,
    pub ordinal: i32,
    pub operations: Vec<Operation>,
    pub project_ids: Vec<String>,
    pub failure_mode: FailureMode,
    /// `None` means the default of 5 s.
    pub timeout_ms: Option<u32>,
    pub enabled: bool,
    pub enforce: bool,
    /// `None` means the default (5 failures).
    pub breaker_failures: Option<u32>,
    /// `None` means the default (30 s).
    pub breaker_cooldown_ms: Option<u32>,
}

/// A partial update: `None` keeps the current value.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PluginUpdate {
    pub endpoint: Option<String>,
    pub ordinal: Option<i32>,
    /// `Some(vec![])` clears the filter (every operation).
    pub operations: Option<Vec<Operation>>,
    /// `Some(vec![])` clears the filter (every project).
    pub project_ids: Option<Vec<String>>,
    pub failure_mode: Option<FailureMode>,
    pub timeout_ms: Option<u32>,
    pub enabled: Option<bool>,
    pub enforce: Option<bool>,
    pub breaker_failures: Option<u32>,
    pub breaker_cooldown_ms: Option<u32>,
    /// Close the circuit now (an operator who mended the plug-in). A new
    /// endpoint closes it too.
    pub close_circuit: bool,
}

impl PluginUpdate {
    pub fn is_empty(&self) -> bool {
        self == &PluginUpdate::default()
    }

    /// Whether the update forgets the plug-in's failures: asked to, or it
    /// moves the plug-in to another endpoint.
    pub fn closes_circuit(&self, current: &Plugin) -> bool {
        self.close_circuit
            || self
                .endpoint
                .as_ref()
                .is_some_and(|endpoint| endpoint != &current.endpoint)
    }
}

pub const DEFAULT_TIMEOUT_MS: u32 = 5_000;
pub const MAX_TIMEOUT_MS: u32 = 60_000;

impl NewPlugin {
    /// Validates the request and turns it into a plugin registered `now`.
    pub fn into_plugin(self, now: DateTime<Utc>) -> Result<Plugin> {
        validate_name(&self.name)?;
        validate_endpoint(&self.endpoint)?;
        let timeout_ms = self.timeout_ms.unwrap_or(DEFAULT_TIMEOUT_MS);
        validate_timeout(timeout_ms)?;
        let defaults = BreakerSettings::default();
        let breaker = BreakerSettings {
            failures: self.breaker_failures.unwrap_or(defaults.failures),
            cooldown_ms: self.breaker_cooldown_ms.unwrap_or(defaults.cooldown_ms),
        }
        .validate()?;
        Ok(Plugin {
            name: self.name,
            endpoint: self.endpoint,
            ordinal: self.ordinal,
            operations: normalize_operations(self.operations),
            project_ids: normalize_project_ids(self.project_ids)?,
            failure_mode: self.failure_mode,
            timeout_ms,
            enabled: self.enabled,
            enforce: self.enforce,
            breaker,
            circuit: CircuitRecord::default(),
            created_at: now,
            updated_at: now,
        })
    }
}

impl Plugin {
    /// The plugin after `update`, validated like a registration and stamped
    /// `now`; the name and creation time never change.
    pub fn with_update(&self, update: &PluginUpdate, now: DateTime<Utc>) -> Result<Plugin> {
        let mut updated = self.clone();
        if let Some(endpoint) = &update.endpoint {
            validate_endpoint(endpoint)?;
            updated.endpoint.clone_from(endpoint);
        }
        if let Some(ordinal) = update.ordinal {
            updated.ordinal = ordinal;
        }
        if let Some(operations) = &update.operations {
            updated.operations = normalize_operations(operations.clone());
        }
        if let Some(project_ids) = &update.project_ids {
            updated.project_ids = normalize_project_ids(project_ids.clone())?;
        }
        if let Some(failure_mode) = update.failure_mode {
            updated.failure_mode = failure_mode;
        }
        if let Some(timeout_ms) = update.timeout_ms {
            validate_timeout(timeout_ms)?;
            updated.timeout_ms = timeout_ms;
        }
        if let Some(enabled) = update.enabled {
            updated.enabled = enabled;
        }
        if let Some(enforce) = update.enforce {
            updated.enforce = enforce;
        }
        updated.breaker = BreakerSettings {
            failures: update.breaker_failures.unwrap_or(self.breaker.failures),
            cooldown_ms: update
                .breaker_cooldown_ms
                .unwrap_or(self.breaker.cooldown_ms),
        }
        .validate()?;
        if update.closes_circuit(self) {
            updated.circuit = CircuitRecord::default();
        }
        updated.updated_at = now;
        Ok(updated)
    }

    /// The plug-in's circuit as a caller meets it at `now`: always closed
    /// when its breaker is off.
    pub fn circuit_at(&self, now: DateTime<Utc>) -> super::Circuit {
        if self.breaker.enabled() {
            self.circuit.circuit(now)
        } else {
            super::Circuit::Closed
        }
    }

    /// Whether `result` stops the chain: in FAIL mode a deny or a failure
    /// does, unless the plug-in only observes.
    pub fn stops_chain(&self, result: super::CallResult) -> bool {
        self.enforce && result.stops_chain(self.failure_mode)
    }

    /// Whether `result` would have stopped the chain, were the plug-in not
    /// in observe mode: recorded, not enforced.
    pub fn observed(&self, result: super::CallResult) -> bool {
        !self.enforce && result.stops_chain(self.failure_mode)
    }

    /// Whether the runner calls this plugin for `operation` on a stack of
    /// `project_id`: enabled, and both filters match (empty = all).
    pub fn applies_to(&self, operation: Operation, project_id: &str) -> bool {
        self.enabled
            && (self.operations.is_empty() || self.operations.contains(&operation))
            && (self.project_ids.is_empty() || self.project_ids.iter().any(|id| id == project_id))
    }
}

fn validate_timeout(timeout_ms: u32) -> Result<()> {
    if timeout_ms == 0 || timeout_ms > MAX_TIMEOUT_MS {
        return Err(Error::InvalidInput(format!(
            "timeout_ms must be between 1 and {MAX_TIMEOUT_MS}, got {timeout_ms}"
        )));
    }
    Ok(())
}

fn normalize_operations(mut operations: Vec<Operation>) -> Vec<Operation> {
    operations.sort();
    operations.dedup();
    operations
}

fn normalize_project_ids(mut project_ids: Vec<String>) -> Result<Vec<String>> {
    for project_id in &project_ids {
        if project_id.is_empty() || project_id.len() > 64 {
            return Err(Error::InvalidInput(format!(
                "project_ids: {project_id:?} must be 1-64 characters"
            )));
        }
    }
    project_ids.sort();
    project_ids.dedup();
    Ok(project_ids)
}

fn validate_name(name: &str) -> Result<()> {
    if name.is_empty() || name.len() > 64 {
        return Err(Error::InvalidInput(format!(
            "name must be 1-64 characters, got {}",
            name.len()
        )));
    }
    if let Some(bad) = name
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-')))
    {
        return Err(Error::InvalidInput(format!(
            "name {name:?} contains {bad:?}: use letters, digits and ._-"
        )));
    }
    Ok(())
}

/// A plugin endpoint is an absolute `http://` or `https://` URL with a host.
fn validate_endpoint(endpoint: &str) -> Result<()> {
    let invalid = |why: &str| {
        Error::InvalidInput(format!(
            "endpoint {endpoint:?} is not a valid gRPC URL: {why} (e.g. http://10.0.0.5:7000)"
        ))
    };
    let uri: tonic::codegen::http::Uri =
        endpoint.parse().map_err(|_| invalid("it does not parse"))?;
    match uri.scheme_str() {
        Some("http" | "https") => {}
        Some(_) => return Err(invalid("the scheme must be http or https")),
        None => return Err(invalid("the scheme is missing")),
    }
    match uri.host() {
        Some(host) if !host.is_empty() => Ok(()),
        _ => Err(invalid("the host is missing")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request() -> NewPlugin {
        NewPlugin {
            name: "quota-check".into(),
            endpoint: "http://127.0.0.1:7000".into(),
            ordinal: 10,
            operations: vec![Operation::Update, Operation::Create, Operation::Create],
            project_ids: vec![],
            failure_mode: FailureMode::Fail,
            timeout_ms: None,
            enabled: true,
            enforce: true,
            breaker_failures: None,
            breaker_cooldown_ms: None,
        }
    }

    #[test]
    fn defaults_apply_and_operations_are_deduplicated() {
        let plugin = request().into_plugin(Utc::now()).expect("valid");
        assert_eq!(plugin.timeout_ms, DEFAULT_TIMEOUT_MS);
        assert_eq!(
            plugin.operations,
            vec![Operation::Create, Operation::Update]
        );
    }

    #[test]
    fn bad_names_are_refused() {
        for name in ["", "has space", &"x".repeat(65)] {
            let error = NewPlugin {
                name: name.into(),
                ..request()
            }
            .into_plugin(Utc::now())
            .expect_err("refused");
            assert!(error.to_string().starts_with("name"), "{error}");
        }
    }

    #[test]
    fn bad_endpoints_are_refused_with_the_reason() {
        for (endpoint, why) in [
            ("not a url", "does not parse"),
            ("ftp://host:1", "scheme must be http"),
            ("/just/a/path", "scheme is missing"),
        ] {
            let error = NewPlugin {
                endpoint: endpoint.into(),
                ..request()
            }
            .into_plugin(Utc::now())
            .expect_err("refused");
            assert!(error.to_string().contains(why), "{endpoint}: {error}");
        }
    }

    #[test]
    fn timeouts_must_be_in_range() {
        for timeout in [0, MAX_TIMEOUT_MS + 1] {
            let error = NewPlugin {
                timeout_ms: Some(timeout),
                ..request()
            }
            .into_plugin(Utc::now())
            .expect_err("refused");
            assert!(error.to_string().contains("timeout_ms"), "{error}");
        }
    }

    #[test]
    fn operations_and_modes_parse_case_insensitively() {
        assert_eq!(Operation::parse("LOCK"), Some(Operation::Lock));
        assert_eq!(Operation::parse("launch"), None);
        assert_eq!(FailureMode::parse("warn"), Some(FailureMode::Warn));
        assert_eq!(FailureMode::parse("ignore"), None);
    }

    #[test]
    fn an_update_changes_only_the_fields_it_names_and_is_validated() {
        let registered_at = Utc::now();
        let plugin = request().into_plugin(registered_at).expect("valid");
        let later = registered_at + chrono::Duration::seconds(5);
        let updated = plugin
            .with_update(
                &PluginUpdate {
                    ordinal: Some(-3),
                    operations: Some(vec![]),
                    enabled: Some(false),
                    ..PluginUpdate::default()
                },
                later,
            )
            .expect("valid update");
        assert_eq!(updated.ordinal, -3);
        assert!(updated.operations.is_empty());
        assert!(!updated.enabled);
        assert_eq!(updated.endpoint, plugin.endpoint);
        assert_eq!(updated.created_at, registered_at);
        assert_eq!(updated.updated_at, later);

        for (update, key) in [
            (
                PluginUpdate {
                    endpoint: Some("ftp://x".into()),
                    ..PluginUpdate::default()
                },
                "endpoint",
            ),
            (
                PluginUpdate {
                    timeout_ms: Some(0),
                    ..PluginUpdate::default()
                },
                "timeout_ms",
            ),
            (
                PluginUpdate {
                    project_ids: Some(vec![String::new()]),
                    ..PluginUpdate::default()
                },
                "project_ids",
            ),
        ] {
            let error = plugin.with_update(&update, later).expect_err("refused");
            assert!(error.to_string().starts_with(key), "{error}");
        }
    }

    #[test]
    fn a_plugin_applies_when_enabled_and_both_filters_match() {
        let plugin = NewPlugin {
            operations: vec![Operation::Create],
            project_ids: vec!["team-a".into()],
            ..request()
        }
        .into_plugin(Utc::now())
        .expect("valid");
        assert!(plugin.applies_to(Operation::Create, "team-a"));
        assert!(!plugin.applies_to(Operation::Delete, "team-a"));
        assert!(!plugin.applies_to(Operation::Create, "team-b"));
        let unfiltered = NewPlugin {
            operations: vec![],
            ..request()
        }
        .into_plugin(Utc::now())
        .expect("valid");
        assert!(unfiltered.applies_to(Operation::Unlock, "anyone"));
        let disabled = Plugin {
            enabled: false,
            ..unfiltered
        };
        assert!(!disabled.applies_to(Operation::Unlock, "anyone"));
    }
}
