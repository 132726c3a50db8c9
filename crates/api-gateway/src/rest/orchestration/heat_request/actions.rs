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
    kind: pb::StackActionKind,
    options: &'static [&'static str],
}

/// Every action of the actions endpoint. A new action is one line here.
const STACK_ACTIONS: &[StackActionRule] = &[
    StackActionRule {
        name: "suspend",
        kind: pb::StackActionKind::Suspend,
        options: &[],
    },
    StackActionRule {
        name: "resume",
        kind: pb::StackActionKind::Resume,
        options: &[],
    },
    StackActionRule {
        name: "check",
        kind: pb::StackActionKind::Check,
        options: &[],
    },
    StackActionRule {
        name: "cancel_update",
        kind: pb::StackActionKind::CancelUpdate,
        options: &[],
    },
];

/// A parsed actions body: what to run and the options given with it.
#[derive(Debug, PartialEq)]
pub struct StackAction {
    pub kind: pb::StackActionKind,
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
            ("suspend", pb::StackActionKind::Suspend),
            ("resume", pb::StackActionKind::Resume),
            ("check", pb::StackActionKind::Check),
            ("cancel_update", pb::StackActionKind::CancelUpdate),
        ] {
            let parsed = stack_action(body(json!({ name: null }))).expect(name);
            assert_eq!(parsed.kind, kind);
            assert!(parsed.options.is_empty());
        }
        stack_action(body(json!({"check": {}}))).expect("an empty object is no options");

        let cases = [
            (json!({}), "no action given"),
            (
                json!({"suspend": null, "resume": null}),
                "one action at a time",
            ),
            (json!({"lock": null}), "unknown action \"lock\""),
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
