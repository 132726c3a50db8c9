//! Automatic recovery with brakes: a cluster's health policy
//! (`senlin.policy.health`) recovers members whose machines failed, within
//! a budget — at most `max_unhealthy` members unhealthy at once (beyond
//! it, something larger than one node is wrong, and replacing nodes
//! would make it worse: Cluster API's `maxUnhealthy`), and at most
//! `max_recoveries` recoveries per `window` (a node that dies again and
//! again is not recovered forever). What the budget allows now, and why
//! it holds back the rest, is decided here, pure.

use chrono::{DateTime, Utc};
use serde_json::{Map, Value};
use uuid::Uuid;

use super::{Node, NodeStatus};
use crate::error::{Error, Result};

/// How a member is recovered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecoveryOperation {
    Reboot,
    Rebuild,
    Recreate,
}

impl RecoveryOperation {
    pub fn as_str(self) -> &'static str {
        match self {
            RecoveryOperation::Reboot => "REBOOT",
            RecoveryOperation::Rebuild => "REBUILD",
            RecoveryOperation::Recreate => "RECREATE",
        }
    }

    fn parse(text: &str) -> Option<RecoveryOperation> {
        match text.to_ascii_uppercase().as_str() {
            "REBOOT" => Some(RecoveryOperation::Reboot),
            "REBUILD" => Some(RecoveryOperation::Rebuild),
            "RECREATE" => Some(RecoveryOperation::Recreate),
            _ => None,
        }
    }
}

/// At most how many members may be unhealthy for recovery to go on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MaxUnhealthy {
    Count(u32),
    /// Of the members, rounded down.
    Percent(u32),
}

impl MaxUnhealthy {
    /// The count it allows among `members`.
    pub fn of(self, members: usize) -> usize {
        match self {
            MaxUnhealthy::Count(count) => usize::try_from(count).unwrap_or(usize::MAX),
            MaxUnhealthy::Percent(percent) => {
                members.saturating_mul(usize::try_from(percent).unwrap_or(100)) / 100
            }
        }
    }

    pub fn describe(self) -> String {
        match self {
            MaxUnhealthy::Count(count) => count.to_string(),
            MaxUnhealthy::Percent(percent) => format!("{percent}%"),
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct HealthPolicy {
    pub recovery: RecoveryOperation,
    /// How often held recoveries are looked at again, in seconds.
    pub interval_secs: u32,
    pub max_unhealthy: MaxUnhealthy,
    /// 0: no limit.
    pub max_recoveries: u32,
    pub window_secs: u32,
}

/// The properties a health policy has: Senlin's `detection` and
/// `recovery`, and Ember's `remediation` (the budget).
pub const HEALTH_PROPERTIES: &[&str] = &["detection", "recovery", "remediation"];

const DEFAULT_INTERVAL_SECS: u32 = 60;
const DEFAULT_WINDOW_SECS: u32 = 600;
const MAX_WINDOW_SECS: u32 = 7 * 86_400;

fn invalid(message: String) -> Error {
    Error::InvalidInput(message)
}

fn object<'a>(
    properties: &'a Map<String, Value>,
    key: &str,
) -> Result<Option<&'a Map<String, Value>>> {
    match properties.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Object(map)) => Ok(Some(map)),
        Some(other) => Err(invalid(format!("{key} must be an object, got {other}"))),
    }
}

fn seconds(
    map: &Map<String, Value>,
    key: &str,
    what: &str,
    range: (u32, u32),
    default: u32,
) -> Result<u32> {
    match map.get(key) {
        None | Some(Value::Null) => Ok(default),
        Some(value) => value
            .as_u64()
            .and_then(|value| u32::try_from(value).ok())
            .filter(|value| (range.0..=range.1).contains(value))
            .ok_or_else(|| {
                invalid(format!(
                    "{what} must be an integer from {} to {}, got {value}",
                    range.0, range.1
                ))
            }),
    }
}

/// Parses a health policy's properties (Senlin's `detection` and
/// `recovery` — its first action is the recovery; detection is the machine
/// watcher's, whatever mode is named — and Ember's `remediation`).
pub fn parse_health(properties: &Map<String, Value>) -> Result<HealthPolicy> {
    let interval_secs = match object(properties, "detection")? {
        Some(detection) => seconds(
            detection,
            "interval",
            "detection.interval",
            (1, 86_400),
            DEFAULT_INTERVAL_SECS,
        )?,
        None => DEFAULT_INTERVAL_SECS,
    };
    let recovery =
        match object(properties, "recovery")?.and_then(|recovery| recovery.get("actions")) {
            None | Some(Value::Null) => RecoveryOperation::Recreate,
            Some(Value::Array(actions)) => match actions.first() {
                None => RecoveryOperation::Recreate,
                Some(action) => {
                    let name = action.get("name").and_then(Value::as_str).unwrap_or("");
                    RecoveryOperation::parse(name).ok_or_else(|| {
                        invalid(format!(
                            "recovery.actions[0].name {name:?} must be REBOOT, REBUILD or RECREATE"
                        ))
                    })?
                }
            },
            Some(other) => {
                return Err(invalid(format!(
                    "recovery.actions must be a list, got {other}"
                )));
            }
        };
    let remediation = object(properties, "remediation")?;
    let empty = Map::new();
    let remediation = remediation.unwrap_or(&empty);
    if let Some(unknown) = remediation
        .keys()
        .find(|key| !["max_unhealthy", "max_recoveries", "window"].contains(&key.as_str()))
    {
        return Err(invalid(format!(
            "remediation.{unknown} is not a setting: use max_unhealthy, max_recoveries, window"
        )));
    }
    let max_unhealthy = match remediation.get("max_unhealthy") {
        None | Some(Value::Null) => MaxUnhealthy::Percent(100),
        Some(Value::Number(number)) => MaxUnhealthy::Count(
            number
                .as_u64()
                .and_then(|count| u32::try_from(count).ok())
                .ok_or_else(|| {
                    invalid(format!(
                        "remediation.max_unhealthy {number} must be a count or a percentage such as \"40%\""
                    ))
                })?,
        ),
        Some(Value::String(text)) => {
            let percent = text
                .strip_suffix('%')
                .and_then(|digits| digits.trim().parse::<u32>().ok())
                .filter(|percent| *percent <= 100);
            match percent {
                Some(percent) => MaxUnhealthy::Percent(percent),
                None => {
                    return Err(invalid(format!(
                        "remediation.max_unhealthy {text:?} must be a count or a percentage from \"0%\" to \"100%\""
                    )));
                }
            }
        }
        Some(other) => {
            return Err(invalid(format!(
                "remediation.max_unhealthy {other} must be a count or a percentage such as \"40%\""
            )));
        }
    };
    Ok(HealthPolicy {
        recovery,
        interval_secs,
        max_unhealthy,
        max_recoveries: seconds(
            remediation,
            "max_recoveries",
            "remediation.max_recoveries",
            (0, 100_000),
            0,
        )?,
        window_secs: seconds(
            remediation,
            "window",
            "remediation.window",
            (1, MAX_WINDOW_SECS),
            DEFAULT_WINDOW_SECS,
        )?,
    })
}

/// The budget as it stands: what the cluster view and "allowed?" show.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Budget {
    pub members: usize,
    pub unhealthy: usize,
    /// The count `max_unhealthy` allows among the members now.
    pub max_unhealthy: usize,
    pub recoveries_in_window: usize,
    /// Recoveries the window still allows now; `None`: no limit.
    pub remaining: Option<usize>,
}

impl Budget {
    /// The budget of `policy` for `members` when the recoveries it started
    /// lately began at `recent`.
    pub fn of(
        policy: &HealthPolicy,
        members: &[Node],
        recent: &[DateTime<Utc>],
        now: DateTime<Utc>,
    ) -> Budget {
        let window = chrono::Duration::seconds(i64::from(policy.window_secs));
        let recoveries_in_window = recent
            .iter()
            .filter(|started| **started > now - window)
            .count();
        Budget {
            members: members.len(),
            unhealthy: members
                .iter()
                .filter(|node| matches!(node.status, NodeStatus::Error | NodeStatus::Warning))
                .count(),
            max_unhealthy: policy.max_unhealthy.of(members.len()),
            recoveries_in_window,
            remaining: (policy.max_recoveries > 0).then(|| {
                usize::try_from(policy.max_recoveries)
                    .unwrap_or(usize::MAX)
                    .saturating_sub(recoveries_in_window)
            }),
        }
    }
}

/// What the budget allows now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision {
    /// The members to recover now.
    pub recover: Vec<Uuid>,
    /// Why the others wait (`None`: none waits).
    pub held: Option<String>,
    /// When the window frees a recovery, if one is held for it.
    pub retry_at: Option<DateTime<Utc>>,
}

/// The budget's answer for `members` (the cluster's counted members) when
/// the recoveries the policy started lately began at `recent` and the
/// members in `recovering` have one queued or running.
pub fn decide(
    policy: &HealthPolicy,
    members: &[Node],
    recovering: &[Uuid],
    recent: &[DateTime<Utc>],
    now: DateTime<Utc>,
) -> Decision {
    let unhealthy: Vec<&Node> = members
        .iter()
        .filter(|node| matches!(node.status, NodeStatus::Error | NodeStatus::Warning))
        .collect();
    let waiting: Vec<&Node> = unhealthy
        .iter()
        .copied()
        .filter(|node| node.status == NodeStatus::Error && !recovering.contains(&node.id))
        .collect();
    let none = Decision {
        recover: Vec::new(),
        held: None,
        retry_at: None,
    };
    if waiting.is_empty() {
        return none;
    }
    let allowed = policy.max_unhealthy.of(members.len());
    if unhealthy.len() > allowed {
        return Decision {
            held: Some(format!(
                "automatic recovery stopped: {} of {} members are unhealthy, more than max_unhealthy {} ({allowed})",
                unhealthy.len(),
                members.len(),
                policy.max_unhealthy.describe()
            )),
            ..none
        };
    }
    let window = chrono::Duration::seconds(i64::from(policy.window_secs));
    let mut in_window: Vec<DateTime<Utc>> = recent
        .iter()
        .copied()
        .filter(|started| *started > now - window)
        .collect();
    in_window.sort();
    let remaining = if policy.max_recoveries == 0 {
        waiting.len()
    } else {
        usize::try_from(policy.max_recoveries)
            .unwrap_or(usize::MAX)
            .saturating_sub(in_window.len())
    };
    let recover: Vec<Uuid> = waiting.iter().take(remaining).map(|node| node.id).collect();
    if recover.len() == waiting.len() {
        return Decision { recover, ..none };
    }
    // The oldest recovery in the window leaves it first.
    let retry_at = in_window
        .get(
            in_window
                .len()
                .saturating_sub(usize::try_from(policy.max_recoveries).unwrap_or(0)),
        )
        .map(|oldest| *oldest + window);
    Decision {
        held: Some(format!(
            "automatic recovery held: the budget of {} recoveries per {} s is spent ({} in the window){}; {} member(s) wait",
            policy.max_recoveries,
            policy.window_secs,
            in_window.len(),
            retry_at.map_or_else(String::new, |at| format!(
                ", the next may start at {}",
                at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
            )),
            waiting.len() - recover.len()
        )),
        recover,
        retry_at,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn members(statuses: &[NodeStatus]) -> Vec<Node> {
        let now = Utc::now();
        statuses
            .iter()
            .enumerate()
            .map(|(index, status)| Node {
                id: Uuid::now_v7(),
                name: format!("node-{index}"),
                cluster_id: Some(Uuid::nil()),
                profile_id: Uuid::nil(),
                index: i32::try_from(index).unwrap_or(0),
                role: String::new(),
                status: *status,
                status_reason: String::new(),
                physical_id: None,
                tainted: false,
                protected: false,
                metadata: Map::new(),
                project_id: "p".into(),
                user_id: "u".into(),
                created_at: now,
                updated_at: now,
            })
            .collect()
    }

    fn policy(properties: Value) -> Result<HealthPolicy> {
        parse_health(properties.as_object().expect("object"))
    }

    #[test]
    fn senlins_spec_parses_and_the_budget_is_emberss() {
        let parsed = policy(json!({
            "detection": {"detection_modes": [{"type": "NODE_STATUS_POLLING"}], "interval": 30},
            "recovery": {"actions": [{"name": "REBOOT"}]},
            "remediation": {"max_unhealthy": "40%", "max_recoveries": 3, "window": 600}
        }))
        .expect("parses");
        assert_eq!(parsed.recovery, RecoveryOperation::Reboot);
        assert_eq!(parsed.interval_secs, 30);
        assert_eq!(parsed.max_unhealthy, MaxUnhealthy::Percent(40));
        assert_eq!((parsed.max_recoveries, parsed.window_secs), (3, 600));
        let defaults = policy(json!({})).expect("parses");
        assert_eq!(defaults.recovery, RecoveryOperation::Recreate);
        assert_eq!(defaults.max_unhealthy, MaxUnhealthy::Percent(100));
        assert_eq!(defaults.max_recoveries, 0);
        for (bad, key) in [
            (
                json!({"remediation": {"max_unhealthy": "140%"}}),
                "remediation.max_unhealthy",
            ),
            (
                json!({"remediation": {"max_unhealthy": -1}}),
                "remediation.max_unhealthy",
            ),
            (json!({"remediation": {"window": 0}}), "remediation.window"),
            (json!({"remediation": {"budget": 1}}), "remediation.budget"),
            (
                json!({"recovery": {"actions": [{"name": "PRAY"}]}}),
                "recovery.actions[0].name",
            ),
        ] {
            let error = policy(bad.clone()).expect_err("refused").to_string();
            assert!(error.starts_with(key), "{bad}: {error}");
        }
    }

    #[test]
    fn recovery_stops_beyond_max_unhealthy() {
        let nodes = members(&[
            NodeStatus::Error,
            NodeStatus::Error,
            NodeStatus::Active,
            NodeStatus::Active,
            NodeStatus::Active,
        ]);
        let mut policy = policy(json!({"remediation": {"max_unhealthy": "40%"}})).expect("parses");
        let decision = decide(&policy, &nodes, &[], &[], Utc::now());
        assert_eq!(decision.recover.len(), 2, "2 of 5 is within 40%");
        policy.max_unhealthy = MaxUnhealthy::Count(1);
        let decision = decide(&policy, &nodes, &[], &[], Utc::now());
        assert!(decision.recover.is_empty());
        assert_eq!(
            decision.held.as_deref(),
            Some(
                "automatic recovery stopped: 2 of 5 members are unhealthy, more than max_unhealthy 1 (1)"
            )
        );
    }

    #[test]
    fn the_window_holds_recoveries_back_until_the_oldest_leaves_it() {
        let nodes = members(&[NodeStatus::Error, NodeStatus::Error, NodeStatus::Active]);
        let policy =
            policy(json!({"remediation": {"max_recoveries": 2, "window": 60}})).expect("parses");
        let now = Utc::now();
        let earlier = [
            now - chrono::Duration::seconds(50),
            now - chrono::Duration::seconds(70),
        ];
        // One recovery in the window (the other left it): one more now.
        let decision = decide(&policy, &nodes, &[], &earlier, now);
        assert_eq!(decision.recover, vec![nodes[0].id]);
        assert_eq!(
            decision.retry_at,
            Some(earlier[0] + chrono::Duration::seconds(60))
        );
        let held = decision.held.expect("held");
        assert!(
            held.starts_with("automatic recovery held: the budget of 2 recoveries per 60 s is spent (1 in the window), the next may start at ")
                && held.ends_with("; 1 member(s) wait"),
            "{held}"
        );
        // A member already being recovered is not started twice.
        let decision = decide(&policy, &nodes, &[nodes[0].id, nodes[1].id], &[], now);
        assert_eq!(decision.recover, Vec::<Uuid>::new());
        assert_eq!(decision.held, None);
    }
}
