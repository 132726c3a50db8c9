//! The body of `POST …/actions`: exactly one key naming the action, its
//! value null or an object of that action's options.

use ember_proto::engine::v1 as pb;
use serde_json::{Map, Value};

use super::{invalid, kind_of};
use crate::error::RestError;

/// One action `POST …/actions` accepts: the body's key, the engine
/// operation it starts, and the options its value may carry.
struct StackActionRule {
    name: &'static str,
    kind: ActionKind,
    options: &'static [&'static str],
}

/// Which engine call an action becomes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ActionKind {
    /// `StackService.RunStackAction` with this kind.
    Run(pb::StackActionKind),
    /// `StackService.LockStack` (options: level, reason).
    Lock,
    /// `StackService.UnlockStack`.
    Unlock,
}

/// Every action of the actions endpoint. A new action is one line here.
const STACK_ACTIONS: &[StackActionRule] = &[
    StackActionRule {
        name: "suspend",
        kind: ActionKind::Run(pb::StackActionKind::Suspend),
        options: &[],
    },
    StackActionRule {
        name: "resume",
        kind: ActionKind::Run(pb::StackActionKind::Resume),
        options: &[],
    },
    StackActionRule {
        name: "check",
        kind: ActionKind::Run(pb::StackActionKind::Check),
        options: &[],
    },
    StackActionRule {
        name: "cancel_update",
        kind: ActionKind::Run(pb::StackActionKind::CancelUpdate),
        options: &[],
    },
    StackActionRule {
        name: "lock",
        kind: ActionKind::Lock,
        options: &["level", "reason", "expires_in", "expires_at"],
    },
    StackActionRule {
        name: "unlock",
        kind: ActionKind::Unlock,
        options: &[],
    },
];

/// A parsed actions body: what to run and the options given with it.
#[derive(Debug, PartialEq)]
pub struct StackAction {
    pub kind: ActionKind,
    pub options: Map<String, Value>,
}

fn action_names() -> String {
    STACK_ACTIONS
        .iter()
        .map(|rule| rule.name)
        .collect::<Vec<_>>()
        .join(", ")
}

/// The body of `POST …/actions`: exactly one key naming the action, its
/// value null or an object of that action's options.
pub fn stack_action(map: Map<String, Value>) -> Result<StackAction, RestError> {
    let mut entries = map.into_iter();
    let Some((name, value)) = entries.next() else {
        return Err(invalid(format!(
            "no action given: send one of {} as the body's only key, e.g. {{\"check\": null}}",
            action_names()
        )));
    };
    if let Some((second, _)) = entries.next() {
        return Err(invalid(format!(
            "one action at a time: the body names both {name:?} and {second:?}"
        )));
    }
    let Some(rule) = STACK_ACTIONS.iter().find(|rule| rule.name == name) else {
        return Err(invalid(format!(
            "unknown action {name:?}: expected one of {}",
            action_names()
        )));
    };
    let options = match value {
        Value::Null => Map::new(),
        Value::Object(options) => options,
        other => {
            return Err(invalid(format!(
                "action {name:?} takes null or an object of options, got {}",
                kind_of(&other)
            )));
        }
    };
    if let Some(unknown) = options
        .keys()
        .find(|key| !rule.options.contains(&key.as_str()))
    {
        return Err(invalid(if rule.options.is_empty() {
            format!("action {name:?} takes no options, got {unknown:?}")
        } else {
            format!(
                "unknown option {unknown:?} for action {name:?}: expected {}",
                rule.options.join(", ")
            )
        }));
    }
    if rule.kind == ActionKind::Lock {
        match options.get("level") {
            None | Some(Value::Null) => {}
            Some(Value::String(level)) if level == "stacks" || level == "all" => {}
            Some(Value::String(level)) => {
                return Err(invalid(format!(
                    "lock level {level:?} is not one of stacks, all"
                )));
            }
            Some(other) => {
                return Err(invalid(format!(
                    "lock level must be a string, got {}",
                    kind_of(other)
                )));
            }
        }
        match options.get("reason") {
            None | Some(Value::Null) => {}
            Some(Value::String(reason)) if !reason.is_empty() && reason.chars().count() <= 255 => {}
            Some(Value::String(_)) => {
                return Err(invalid("lock reason must be 1-255 characters".to_owned()));
            }
            Some(other) => {
                return Err(invalid(format!(
                    "lock reason must be a string, got {}",
                    kind_of(other)
                )));
            }
        }
        match options.get("expires_in") {
            None | Some(Value::Null) => {}
            Some(Value::Number(seconds)) if seconds.is_i64() => {}
            Some(other) => {
                return Err(invalid(format!(
                    "expires_in: must be whole seconds, got {other}"
                )));
            }
        }
        match options.get("expires_at") {
            None | Some(Value::Null) => {}
            Some(Value::String(text)) if chrono::DateTime::parse_from_rfc3339(text).is_ok() => {}
            Some(other) => {
                return Err(invalid(format!(
                    "expires_at: {other} is not an ISO 8601 time with its offset (2026-11-29T12:00:00Z)"
                )));
            }
        }
    }
    Ok(StackAction {
        kind: rule.kind,
        options,
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::testing::{body, message};
    use super::*;

    #[test]
    fn an_actions_body_names_exactly_one_known_action() {
        for (name, kind) in [
            ("suspend", ActionKind::Run(pb::StackActionKind::Suspend)),
            ("resume", ActionKind::Run(pb::StackActionKind::Resume)),
            ("check", ActionKind::Run(pb::StackActionKind::Check)),
            (
                "cancel_update",
                ActionKind::Run(pb::StackActionKind::CancelUpdate),
            ),
            ("lock", ActionKind::Lock),
            ("unlock", ActionKind::Unlock),
        ] {
            let parsed = stack_action(body(json!({ name: null }))).expect(name);
            assert_eq!(parsed.kind, kind);
            assert!(parsed.options.is_empty());
        }
        stack_action(body(json!({"check": {}}))).expect("an empty object is no options");
        let lock = stack_action(body(
            json!({"lock": {"level": "stacks", "reason": "db upgrade"}}),
        ))
        .expect("lock");
        assert_eq!(lock.options["level"], json!("stacks"));

        let cases = [
            (json!({}), "no action given"),
            (
                json!({"suspend": null, "resume": null}),
                "one action at a time",
            ),
            (
                json!({"lock": {"level": "everything"}}),
                "lock level \"everything\" is not one of stacks, all",
            ),
            (json!({"lock": {"level": 3}}), "lock level must be a string"),
            (
                json!({"lock": {"reason": ""}}),
                "lock reason must be 1-255 characters",
            ),
            (
                json!({"unlock": {"force": true}}),
                "action \"unlock\" takes no options",
            ),
            (json!({"cancel_without_rollback": null}), "unknown action"),
            (
                json!({"check": {"deep": true}}),
                "takes no options, got \"deep\"",
            ),
            (json!({"check": 1}), "takes null or an object"),
        ];
        for (value, expected) in cases {
            let error = stack_action(body(value.clone())).expect_err("refused");
            assert!(message(error).contains(expected), "{value} → {expected}");
        }
    }
}
