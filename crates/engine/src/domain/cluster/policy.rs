//! Policy specs: `senlin.policy.deletion-1.0|1.1` (with the lifecycle
//! `hooks` of spec senlin-scale-in-lifecycle-hooks),
//! `senlin.policy.scaling-1.0`, `senlin.policy.health-1.0|1.1` and Ember's
//! `ember.policy.launch-1.0` (lifecycle hooks on node creation), parsed
//! and checked once when the policy is created so a cluster action never
//! meets a bad spec.

use serde_json::{Map, Value};

use crate::error::{Error, Result};

/// The default and the bounds of a hook's `timeout`, in seconds: a new
/// policy's lies in 30 s – 2 h (AWS Auto Scaling's range; the floor is the
/// engine's `lifecycle_hook_min_timeout_s`); a stored one is read back up
/// to the day earlier releases allowed.
pub const DEFAULT_HOOK_TIMEOUT_SECS: u32 = 300;
pub const MIN_HOOK_TIMEOUT_SECS: u32 = 30;
pub const MAX_HOOK_TIMEOUT_SECS: u32 = 7_200;
const MAX_STORED_HOOK_TIMEOUT_SECS: u32 = 86_400;

/// What a lifecycle wait comes to: the application's answer, or the
/// hook's default when the deadline passes first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum LifecycleResult {
    /// Go on: a removed node is deleted.
    #[default]
    Continue,
    /// Do not: a removed node is kept, out of the cluster and out of
    /// service, for the operator (AWS's Retain).
    Abandon,
}

impl LifecycleResult {
    pub fn as_str(self) -> &'static str {
        match self {
            LifecycleResult::Continue => "CONTINUE",
            LifecycleResult::Abandon => "ABANDON",
        }
    }

    /// `CONTINUE` or `ABANDON`, in any case; `key` names it in the error.
    pub fn parse(text: &str, key: &str) -> Result<LifecycleResult> {
        match text.to_ascii_uppercase().as_str() {
            "CONTINUE" => Ok(LifecycleResult::Continue),
            "ABANDON" => Ok(LifecycleResult::Abandon),
            _ => Err(invalid(&format!(
                "{key} {text:?} must be CONTINUE or ABANDON"
            ))),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Criteria {
    OldestFirst,
    YoungestFirst,
    OldestProfileFirst,
    Random,
}

impl Criteria {
    pub fn parse(text: &str) -> Option<Criteria> {
        match text {
            "OLDEST_FIRST" => Some(Criteria::OldestFirst),
            "YOUNGEST_FIRST" => Some(Criteria::YoungestFirst),
            "OLDEST_PROFILE_FIRST" => Some(Criteria::OldestProfileFirst),
            "RANDOM" => Some(Criteria::Random),
            _ => None,
        }
    }
}

/// Where lifecycle hook messages go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HookTarget {
    /// `zaqar` (the spec's default) or `queue`: the message bus queue.
    Queue(String),
    Webhook(String),
}

/// The lifecycle transition a hook holds a node in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HookTransition {
    /// A new node waits before it goes into service (a launch policy).
    Launching,
    /// A node chosen for removal waits before it goes (a deletion policy).
    Terminating,
}

impl HookTransition {
    /// As lifecycle-hook's messages say it (`lifecycle_transition_type`).
    pub fn as_str(self) -> &'static str {
        match self {
            HookTransition::Launching => "launching",
            HookTransition::Terminating => "terminating",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LifecycleHooks {
    pub target: HookTarget,
    pub timeout_secs: u32,
    /// What the wait comes to when its deadline passes.
    pub default_result: LifecycleResult,
}

impl LifecycleHooks {
    /// Refuses a timeout outside `min_secs` – [`MAX_HOOK_TIMEOUT_SECS`]:
    /// checked when a policy is made (what is stored is read back as it
    /// was).
    pub fn check_timeout(&self, min_secs: u32) -> Result<()> {
        if (min_secs..=MAX_HOOK_TIMEOUT_SECS).contains(&self.timeout_secs) {
            Ok(())
        } else {
            Err(invalid(&format!(
                "hooks.timeout {} must be {min_secs}-{MAX_HOOK_TIMEOUT_SECS} seconds",
                self.timeout_secs
            )))
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct DeletionPolicy {
    pub criteria: Criteria,
    pub destroy_after_deletion: bool,
    pub grace_period: u32,
    pub reduce_desired_capacity: bool,
    pub hooks: Option<LifecycleHooks>,
}

/// What a launch hook's ABANDON does to the action that made the node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnAbandon {
    /// The abandoned node is deleted and a new one built in its place (up
    /// to the policy's `retries`; then the action fails).
    Retry,
    /// The abandoned node is deleted and the action fails.
    Fail,
}

impl OnAbandon {
    pub fn as_str(self) -> &'static str {
        match self {
            OnAbandon::Retry => "RETRY",
            OnAbandon::Fail => "FAIL",
        }
    }
}

/// `ember.policy.launch-1.0`: every node a cluster builds (scale-out,
/// resize up, node create into the cluster) waits, built but not in
/// service, until the application completes its lifecycle action.
#[derive(Debug, Clone, PartialEq)]
pub struct LaunchPolicy {
    pub hooks: LifecycleHooks,
    pub on_abandon: OnAbandon,
    /// Rounds of replacements a growth may build for abandoned nodes.
    pub retries: u32,
}

/// The most rounds of replacements a launch policy may ask for.
pub const MAX_LAUNCH_RETRIES: u32 = 10;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ScalingEvent {
    ScaleIn,
    ScaleOut,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ScalingPolicy {
    pub event: ScalingEvent,
    /// EXACT_CAPACITY, CHANGE_IN_CAPACITY or CHANGE_IN_PERCENTAGE.
    pub adjustment_type: String,
    pub number: f64,
    pub min_step: i32,
    pub best_effort: bool,
    pub cooldown: u32,
}

#[derive(Debug, Clone, PartialEq)]
pub enum PolicyKind {
    Deletion {
        version: String,
        policy: DeletionPolicy,
    },
    Scaling(ScalingPolicy),
    Health {
        version: String,
        policy: super::remediation::HealthPolicy,
    },
    Launch(LaunchPolicy),
}

impl PolicyKind {
    /// The lifecycle hooks the policy holds nodes with, if any.
    pub fn hooks(&self) -> Option<&LifecycleHooks> {
        match self {
            PolicyKind::Deletion { policy, .. } => policy.hooks.as_ref(),
            PolicyKind::Launch(policy) => Some(&policy.hooks),
            PolicyKind::Scaling(_) | PolicyKind::Health { .. } => None,
        }
    }

    /// `senlin.policy.deletion-1.1`, as Senlin names policy types.
    pub fn type_name(&self) -> String {
        match self {
            PolicyKind::Deletion { version, .. } => format!("senlin.policy.deletion-{version}"),
            PolicyKind::Scaling(_) => "senlin.policy.scaling-1.0".to_owned(),
            PolicyKind::Health { version, .. } => format!("senlin.policy.health-{version}"),
            PolicyKind::Launch(_) => "ember.policy.launch-1.0".to_owned(),
        }
    }

    /// Parses `{"type", "version", "properties"}` given in a request:
    /// a property the type's schema does not have is refused, as Senlin
    /// refuses it.
    pub fn parse(spec: &Value) -> Result<PolicyKind> {
        Self::parse_checking(spec, true)
    }

    /// Parses a spec recorded earlier: what an older engine accepted and
    /// stored (properties since refused included) still reads.
    pub fn parse_stored(spec: &Value) -> Result<PolicyKind> {
        Self::parse_checking(spec, false)
    }

    fn parse_checking(spec: &Value, refuse_unknown_items: bool) -> Result<PolicyKind> {
        let refuse_unknown =
            |properties: &Map<String, Value>, known: &[&str]| match refuse_unknown_items {
                true => refuse_unknown(properties, known),
                false => Ok(()),
            };
        let (type_name, version) = spec_type_and_version(spec)?;
        let object = spec
            .as_object()
            .ok_or_else(|| invalid("The provided spec is not a map."))?;
        let empty = Map::new();
        let properties = match object.get("properties") {
            None | Some(Value::Null) => &empty,
            Some(Value::Object(map)) => map,
            Some(_) => return Err(invalid("policy spec properties must be an object")),
        };
        match (type_name.as_str(), version.as_str()) {
            ("senlin.policy.deletion", "1.0") => {
                refuse_unknown(properties, DELETION_1_0_PROPERTIES)?;
                Ok(PolicyKind::Deletion {
                    policy: parse_deletion(properties, false)?,
                    version,
                })
            }
            ("senlin.policy.deletion", "1.1") => {
                refuse_unknown(properties, DELETION_1_1_PROPERTIES)?;
                Ok(PolicyKind::Deletion {
                    policy: parse_deletion(properties, true)?,
                    version,
                })
            }
            ("senlin.policy.scaling", "1.0") => {
                refuse_unknown(properties, SCALING_PROPERTIES)?;
                Ok(PolicyKind::Scaling(parse_scaling(properties)?))
            }
            ("senlin.policy.health", "1.0" | "1.1") => {
                refuse_unknown(properties, super::remediation::HEALTH_PROPERTIES)?;
                Ok(PolicyKind::Health {
                    policy: super::remediation::parse_health(properties)?,
                    version,
                })
            }
            ("ember.policy.launch", "1.0") => {
                refuse_unknown(properties, LAUNCH_PROPERTIES)?;
                Ok(PolicyKind::Launch(parse_launch(properties)?))
            }
            // Senlin's 404 for a type it has no plugin of (Ember's types:
            // senlin.policy.deletion 1.0 and 1.1, senlin.policy.scaling 1.0,
            // senlin.policy.health 1.0 and 1.1, ember.policy.launch 1.0).
            _ => Err(Error::NotFound(format!(
                "The policy_type '{type_name}-{version}' could not be found."
            ))),
        }
    }
}

/// The properties of each policy type's spec (Senlin's schemas).
const DELETION_1_0_PROPERTIES: &[&str] = &[
    "criteria",
    "destroy_after_deletion",
    "grace_period",
    "reduce_desired_capacity",
];
const DELETION_1_1_PROPERTIES: &[&str] = &[
    "criteria",
    "destroy_after_deletion",
    "grace_period",
    "reduce_desired_capacity",
    "hooks",
];
const SCALING_PROPERTIES: &[&str] = &["event", "adjustment"];
const LAUNCH_PROPERTIES: &[&str] = &["hooks", "on_abandon", "retries"];

/// Refuses a property the type's schema does not have, in Senlin's words
/// and with its status (see [`Error::PolicySpecRefused`]).
fn refuse_unknown(properties: &Map<String, Value>, known: &[&str]) -> Result<()> {
    match properties.keys().find(|key| !known.contains(&key.as_str())) {
        Some(unknown) => Err(Error::PolicySpecRefused(format!(
            "Unrecognizable spec item '{unknown}'"
        ))),
        None => Ok(()),
    }
}

/// A spec's `type` and `version` (`("os.nova.server", "1.0")`), or what
/// is missing, in Senlin's words.
pub fn spec_type_and_version(spec: &Value) -> Result<(String, String)> {
    let object = spec
        .as_object()
        .ok_or_else(|| invalid("The provided spec is not a map."))?;
    let type_name = match object.get("type") {
        None => {
            return Err(invalid(
                "The 'type' key is missing from the provided spec map.",
            ));
        }
        Some(Value::String(text)) => text.clone(),
        Some(other) => other.to_string(),
    };
    if !object.contains_key("version") {
        return Err(invalid(
            "The 'version' key is missing from the provided spec map.",
        ));
    }
    Ok((type_name, version_text(object.get("version"))))
}

pub(super) fn version_text(value: Option<&Value>) -> String {
    match value {
        Some(Value::String(text)) => text.clone(),
        Some(Value::Number(number)) => {
            let text = number.to_string();
            if text.contains('.') {
                text
            } else {
                format!("{text}.0")
            }
        }
        _ => String::new(),
    }
}

fn invalid(message: &str) -> Error {
    Error::InvalidInput(message.to_owned())
}

fn boolean(properties: &Map<String, Value>, key: &str, default: bool) -> Result<bool> {
    match properties.get(key) {
        None | Some(Value::Null) => Ok(default),
        Some(Value::Bool(value)) => Ok(*value),
        Some(other) => Err(invalid(&format!("{key} must be a boolean, got {other}"))),
    }
}

fn unsigned(properties: &Map<String, Value>, key: &str, default: u32) -> Result<u32> {
    match properties.get(key) {
        None | Some(Value::Null) => Ok(default),
        Some(value) => value
            .as_u64()
            .and_then(|value| u32::try_from(value).ok())
            .ok_or_else(|| {
                invalid(&format!(
                    "{key} must be a non-negative integer, got {value}"
                ))
            }),
    }
}

fn parse_deletion(properties: &Map<String, Value>, hooks_allowed: bool) -> Result<DeletionPolicy> {
    let criteria = match properties.get("criteria").and_then(Value::as_str) {
        None => Criteria::Random,
        Some(text) => Criteria::parse(text).ok_or_else(|| {
            invalid(&format!(
                "criteria {text:?} must be OLDEST_FIRST, YOUNGEST_FIRST, OLDEST_PROFILE_FIRST or RANDOM"
            ))
        })?,
    };
    let hooks = match properties.get("hooks") {
        None | Some(Value::Null) => None,
        Some(_) if !hooks_allowed => {
            return Err(invalid(
                "hooks need senlin.policy.deletion version 1.1 (this spec says 1.0)",
            ));
        }
        // Senlin's default on timeout: the node goes.
        Some(Value::Object(hooks)) => Some(parse_hooks(hooks, LifecycleResult::Continue)?),
        Some(_) => return Err(invalid("hooks must be an object")),
    };
    Ok(DeletionPolicy {
        criteria,
        destroy_after_deletion: boolean(properties, "destroy_after_deletion", true)?,
        grace_period: unsigned(properties, "grace_period", 0)?,
        reduce_desired_capacity: boolean(properties, "reduce_desired_capacity", true)?,
        hooks,
    })
}

fn parse_launch(properties: &Map<String, Value>) -> Result<LaunchPolicy> {
    let hooks = match properties.get("hooks") {
        // AWS's default on timeout for a launching instance: abandon it.
        Some(Value::Object(hooks)) => parse_hooks(hooks, LifecycleResult::Abandon)?,
        None | Some(Value::Null) => {
            return Err(invalid(
                "hooks is required: a launch policy holds new nodes with a lifecycle hook",
            ));
        }
        Some(_) => return Err(invalid("hooks must be an object")),
    };
    let on_abandon = match properties.get("on_abandon") {
        None | Some(Value::Null) => OnAbandon::Retry,
        Some(Value::String(text)) => match text.to_ascii_uppercase().as_str() {
            "RETRY" => OnAbandon::Retry,
            "FAIL" => OnAbandon::Fail,
            _ => {
                return Err(invalid(&format!(
                    "on_abandon {text:?} must be RETRY or FAIL"
                )));
            }
        },
        Some(other) => {
            return Err(invalid(&format!(
                "on_abandon {other} must be RETRY or FAIL"
            )));
        }
    };
    let retries = unsigned(properties, "retries", 3)?;
    if retries > MAX_LAUNCH_RETRIES {
        return Err(invalid(&format!(
            "retries {retries} must be 0-{MAX_LAUNCH_RETRIES}"
        )));
    }
    Ok(LaunchPolicy {
        hooks,
        on_abandon,
        retries,
    })
}

/// A spec's `hooks`; `default_result` when it names none.
fn parse_hooks(
    hooks: &Map<String, Value>,
    default_result: LifecycleResult,
) -> Result<LifecycleHooks> {
    let empty = Map::new();
    let params = match hooks.get("params") {
        None | Some(Value::Null) => &empty,
        Some(Value::Object(params)) => params,
        Some(_) => return Err(invalid("hooks.params must be an object")),
    };
    let text = |key: &str| {
        params
            .get(key)
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned()
    };
    let target = match hooks.get("type").and_then(Value::as_str).unwrap_or("zaqar") {
        "zaqar" | "queue" => {
            let queue = text("queue");
            let valid = !queue.is_empty()
                && queue.len() <= 64
                && queue
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-'));
            if !valid {
                return Err(invalid(&format!(
                    "hooks.params.queue {queue:?} must be 1-64 letters, digits, '_' or '-'"
                )));
            }
            HookTarget::Queue(queue)
        }
        "webhook" => {
            let url = text("url");
            if !(url.starts_with("http://") || url.starts_with("https://")) || url.len() > 2048 {
                return Err(invalid(&format!(
                    "hooks.params.url {url:?} must be an http:// or https:// URL"
                )));
            }
            HookTarget::Webhook(url)
        }
        other => {
            return Err(invalid(&format!(
                "hooks.type {other:?} must be zaqar, queue or webhook"
            )));
        }
    };
    let timeout_secs = unsigned(hooks, "timeout", DEFAULT_HOOK_TIMEOUT_SECS)?;
    if timeout_secs == 0 || timeout_secs > MAX_STORED_HOOK_TIMEOUT_SECS {
        return Err(invalid(&format!(
            "hooks.timeout {timeout_secs} must be {MIN_HOOK_TIMEOUT_SECS}-{MAX_HOOK_TIMEOUT_SECS} seconds"
        )));
    }
    let default_result = match hooks.get("default_result") {
        None | Some(Value::Null) => default_result,
        Some(Value::String(text)) => LifecycleResult::parse(text, "hooks.default_result")?,
        Some(other) => {
            return Err(invalid(&format!(
                "hooks.default_result {other} must be CONTINUE or ABANDON"
            )));
        }
    };
    Ok(LifecycleHooks {
        target,
        timeout_secs,
        default_result,
    })
}

fn parse_scaling(properties: &Map<String, Value>) -> Result<ScalingPolicy> {
    let event = match properties.get("event").and_then(Value::as_str) {
        Some("CLUSTER_SCALE_IN") => ScalingEvent::ScaleIn,
        Some("CLUSTER_SCALE_OUT") => ScalingEvent::ScaleOut,
        other => {
            return Err(invalid(&format!(
                "event {other:?} must be CLUSTER_SCALE_IN or CLUSTER_SCALE_OUT"
            )));
        }
    };
    let empty = Map::new();
    let adjustment = match properties.get("adjustment") {
        None | Some(Value::Null) => &empty,
        Some(Value::Object(map)) => map,
        Some(_) => return Err(invalid("adjustment must be an object")),
    };
    let adjustment_type = adjustment
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or("CHANGE_IN_CAPACITY")
        .to_owned();
    if super::sizing::AdjustmentType::parse(&adjustment_type).is_err() {
        // Senlin's schema refuses it so, and answers 500 (as for an
        // unknown spec item).
        return Err(Error::PolicySpecRefused(format!(
            "'{adjustment_type}' must be one of the allowed values: EXACT_CAPACITY, CHANGE_IN_CAPACITY, CHANGE_IN_PERCENTAGE"
        )));
    }
    let number = match adjustment.get("number") {
        None | Some(Value::Null) => 1.0,
        Some(value) => value
            .as_f64()
            .filter(|number| *number >= 0.0)
            .ok_or_else(|| {
                invalid(&format!(
                    "adjustment.number must be a non-negative number, got {value}"
                ))
            })?,
    };
    Ok(ScalingPolicy {
        event,
        adjustment_type,
        number,
        min_step: i32::try_from(unsigned(adjustment, "min_step", 1)?).unwrap_or(i32::MAX),
        best_effort: boolean(adjustment, "best_effort", false)?,
        cooldown: unsigned(adjustment, "cooldown", 0)?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn deletion_1_1_with_webhook_hooks_parses() {
        let spec = json!({"type": "senlin.policy.deletion", "version": 1.1, "properties": {
            "criteria": "OLDEST_FIRST",
            "hooks": {"type": "webhook", "params": {"url": "http://127.0.0.1:9/x"}, "timeout": 30}}});
        let PolicyKind::Deletion { policy, version } = PolicyKind::parse(&spec).expect("parses")
        else {
            panic!("not a deletion policy")
        };
        assert_eq!(version, "1.1");
        assert_eq!(policy.criteria, Criteria::OldestFirst);
        assert_eq!(
            policy.hooks,
            Some(LifecycleHooks {
                target: HookTarget::Webhook("http://127.0.0.1:9/x".into()),
                timeout_secs: 30,
                default_result: LifecycleResult::Continue,
            })
        );
    }

    #[test]
    fn a_hook_has_a_default_result_and_a_new_ones_timeout_is_bounded() {
        let spec = |hooks: Value| {
            json!({"type": "senlin.policy.deletion", "version": "1.1",
                "properties": {"hooks": hooks}})
        };
        let hooks_of = |spec: Value| match PolicyKind::parse(&spec) {
            Ok(PolicyKind::Deletion { policy, .. }) => Ok(policy.hooks.expect("hooks")),
            Ok(_) => panic!("not a deletion policy"),
            Err(error) => Err(error.to_string()),
        };
        let abandon = hooks_of(spec(json!({"params": {"queue": "q"},
            "default_result": "abandon", "timeout": 60})))
        .expect("parses");
        assert_eq!(abandon.default_result, LifecycleResult::Abandon);
        let error = hooks_of(spec(
            json!({"params": {"queue": "q"}, "default_result": "RETAIN"}),
        ))
        .expect_err("refused");
        assert!(
            error.contains("hooks.default_result \"RETAIN\" must be CONTINUE or ABANDON"),
            "{error}"
        );
        assert!(abandon.check_timeout(MIN_HOOK_TIMEOUT_SECS).is_ok());
        for (timeout, floor) in [(29, MIN_HOOK_TIMEOUT_SECS), (7_201, 1), (0, 1)] {
            let hooks = LifecycleHooks {
                timeout_secs: timeout,
                ..abandon.clone()
            };
            let error = hooks.check_timeout(floor).expect_err("refused").to_string();
            assert!(error.starts_with("hooks.timeout"), "{error}");
        }
        // A policy stored by an earlier release with a day-long hook reads
        // back.
        assert_eq!(
            hooks_of(spec(json!({"params": {"queue": "q"}, "timeout": 86_400})))
                .expect("parses")
                .timeout_secs,
            86_400
        );
    }

    #[test]
    fn hooks_default_to_zaqar_and_need_1_1() {
        let spec = json!({"type": "senlin.policy.deletion", "version": "1.1",
            "properties": {"hooks": {"params": {"queue": "drain"}}}});
        let PolicyKind::Deletion { policy, .. } = PolicyKind::parse(&spec).expect("parses") else {
            panic!("not a deletion policy")
        };
        assert_eq!(
            policy.hooks.map(|hooks| hooks.target),
            Some(HookTarget::Queue("drain".into()))
        );
        let old = json!({"type": "senlin.policy.deletion", "version": "1.0",
            "properties": {"hooks": {"params": {"queue": "drain"}}}});
        assert!(PolicyKind::parse(&old).is_err());
        let bad = json!({"type": "senlin.policy.deletion", "version": "1.1",
            "properties": {"hooks": {"type": "sqs", "params": {"queue": "q"}}}});
        let error = PolicyKind::parse(&bad).expect_err("bad type").to_string();
        assert!(error.contains("hooks.type \"sqs\""), "{error}");
    }

    #[test]
    fn a_launch_policy_holds_new_nodes_and_abandons_on_timeout_by_default() {
        let spec = |properties: Value| json!({"type": "ember.policy.launch", "version": "1.0", "properties": properties});
        let PolicyKind::Launch(policy) =
            PolicyKind::parse(&spec(json!({"hooks": {"params": {"queue": "warm"}}})))
                .expect("parses")
        else {
            panic!("not a launch policy")
        };
        assert_eq!(policy.hooks.default_result, LifecycleResult::Abandon);
        assert_eq!(policy.hooks.target, HookTarget::Queue("warm".into()));
        assert_eq!((policy.on_abandon, policy.retries), (OnAbandon::Retry, 3));
        let kind = PolicyKind::parse(&spec(json!({
            "hooks": {"type": "webhook", "params": {"url": "https://hooks.example/warm"},
                "timeout": 60, "default_result": "CONTINUE"},
            "on_abandon": "fail", "retries": 0})))
        .expect("parses");
        assert_eq!(kind.type_name(), "ember.policy.launch-1.0");
        assert_eq!(
            kind.hooks().map(|hooks| hooks.default_result),
            Some(LifecycleResult::Continue)
        );
        for (properties, message) in [
            (json!({}), "hooks is required"),
            (
                json!({"hooks": {"params": {"queue": "q"}}, "on_abandon": "RETAIN"}),
                "on_abandon \"RETAIN\" must be RETRY or FAIL",
            ),
            (
                json!({"hooks": {"params": {"queue": "q"}}, "retries": 11}),
                "retries 11 must be 0-10",
            ),
        ] {
            let error = PolicyKind::parse(&spec(properties))
                .expect_err("refused")
                .to_string();
            assert!(error.contains(message), "{error}");
        }
        let extra = spec(json!({"hooks": {"params": {"queue": "q"}}, "criteria": "RANDOM"}));
        assert!(matches!(
            PolicyKind::parse(&extra),
            Err(Error::PolicySpecRefused(message)) if message == "Unrecognizable spec item 'criteria'"
        ));
    }

    #[test]
    fn scaling_policy_parses() {
        let spec = json!({"type": "senlin.policy.scaling", "version": "1.0",
            "properties": {"event": "CLUSTER_SCALE_IN", "adjustment": {"type": "CHANGE_IN_CAPACITY", "number": 2}}});
        let PolicyKind::Scaling(policy) = PolicyKind::parse(&spec).expect("parses") else {
            panic!("not scaling")
        };
        assert_eq!(policy.event, ScalingEvent::ScaleIn);
        assert!((policy.number - 2.0).abs() < f64::EPSILON);
    }

    #[test]
    fn unknown_types_and_properties_are_said_as_senlin_says_them() {
        let bogus = json!({"type": "senlin.policy.bogus", "version": "1.0", "properties": {}});
        match PolicyKind::parse(&bogus) {
            Err(Error::NotFound(message)) => assert_eq!(
                message,
                "The policy_type 'senlin.policy.bogus-1.0' could not be found."
            ),
            other => panic!("{other:?}"),
        }
        let extra = json!({"type": "senlin.policy.scaling", "version": "1.0",
            "properties": {"event": "CLUSTER_SCALE_IN", "bogus": "foo"}});
        match PolicyKind::parse(&extra) {
            Err(Error::PolicySpecRefused(message)) => {
                assert_eq!(message, "Unrecognizable spec item 'bogus'")
            }
            other => panic!("{other:?}"),
        }
        let bad_type = json!({"type": "senlin.policy.scaling", "version": "1.0",
            "properties": {"event": "CLUSTER_SCALE_OUT",
                "adjustment": {"type": "blah", "number": 2, "min_step": 1, "best_effort": true}}});
        match PolicyKind::parse(&bad_type) {
            Err(Error::PolicySpecRefused(message)) => assert_eq!(
                message,
                "'blah' must be one of the allowed values: EXACT_CAPACITY, CHANGE_IN_CAPACITY, CHANGE_IN_PERCENTAGE"
            ),
            other => panic!("{other:?}"),
        }
        // What an older engine stored still reads.
        assert!(matches!(
            PolicyKind::parse_stored(&extra),
            Ok(PolicyKind::Scaling(_))
        ));
    }
}
