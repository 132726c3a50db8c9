//! Wait conditions (Heat's `OS::Heat::WaitCondition` and its handle, and
//! the CloudFormation pair): what a signal to a handle must say, how it is
//! completed with Heat's defaults, and what a wait condition makes of the
//! signals its handle holds. Pure rules; the resource types and the store
//! live elsewhere.

use serde_json::{Map, Value};

/// A signal's status.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SignalStatus {
    Success,
    Failure,
}

impl SignalStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            SignalStatus::Success => "SUCCESS",
            SignalStatus::Failure => "FAILURE",
        }
    }

    pub fn parse(text: &str) -> Option<SignalStatus> {
        match text {
            "SUCCESS" => Some(SignalStatus::Success),
            "FAILURE" => Some(SignalStatus::Failure),
            _ => None,
        }
    }
}

/// Which spelling a handle takes: Heat's (`status`, `reason`, `data`, `id`,
/// each optional) or CloudFormation's (`Status`, `Reason`, `Data`,
/// `UniqueId`, all required), as the two handle types of Heat do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HandleStyle {
    Heat,
    CloudFormation,
}

/// A signal as the caller sent it, checked. A missing id or reason is
/// given one when it is stored (the signal's number: that needs the count
/// of signals already there, taken atomically by the store).
#[derive(Debug, Clone, PartialEq)]
pub struct SignalInput {
    pub unique_id: Option<String>,
    pub status: SignalStatus,
    pub reason: Option<String>,
    pub data: Value,
}

/// A stored signal.
#[derive(Debug, Clone, PartialEq)]
pub struct WaitSignal {
    pub unique_id: String,
    pub status: SignalStatus,
    pub reason: String,
    pub data: Value,
}

/// Heat's answer to a malformed signal body.
pub const INVALID_SIGNAL: &str = "Metadata format invalid";

/// Checks a signal body. Heat's handle takes `null` or `{}` as a success
/// and fills in what is missing; any key other than its four, or a status
/// other than SUCCESS or FAILURE, is invalid. The CloudFormation handle
/// takes exactly its four keys.
pub fn parse_signal(details: &Value, style: HandleStyle) -> Result<SignalInput, String> {
    let empty = Map::new();
    let fields = match details {
        Value::Null => &empty,
        Value::Object(fields) => fields,
        _ => {
            return Err(format!(
                "{INVALID_SIGNAL}: the signal must be a JSON object"
            ));
        }
    };
    let (id_key, status_key, reason_key, data_key) = match style {
        HandleStyle::Heat => ("id", "status", "reason", "data"),
        HandleStyle::CloudFormation => ("UniqueId", "Status", "Reason", "Data"),
    };
    if let Some(unknown) = fields
        .keys()
        .find(|key| ![id_key, status_key, reason_key, data_key].contains(&key.as_str()))
    {
        return Err(format!(
            "{INVALID_SIGNAL}: unknown key {:?} (a signal takes {status_key}, {reason_key}, {data_key} and {id_key})",
            ember_runtime::quote::quoted(unknown)
        ));
    }
    if style == HandleStyle::CloudFormation
        && let Some(missing) = [id_key, status_key, reason_key, data_key]
            .into_iter()
            .find(|key| !fields.contains_key(*key))
    {
        return Err(format!("{INVALID_SIGNAL}: {missing} is missing"));
    }
    let status = match fields.get(status_key) {
        None | Some(Value::Null) => SignalStatus::Success,
        Some(Value::String(text)) => SignalStatus::parse(text).ok_or_else(|| {
            format!(
                "{INVALID_SIGNAL}: {status_key} must be SUCCESS or FAILURE, got {:?}",
                ember_runtime::quote::quoted(text)
            )
        })?,
        Some(other) => {
            return Err(format!(
                "{INVALID_SIGNAL}: {status_key} must be SUCCESS or FAILURE, got {}",
                ember_runtime::quote::quoted(&other.to_string())
            ));
        }
    };
    let text = |value: Option<&Value>| -> Option<String> {
        match value? {
            Value::Null => None,
            Value::String(text) => Some(text.clone()),
            other => Some(other.to_string()),
        }
    };
    Ok(SignalInput {
        unique_id: text(fields.get(id_key)),
        status,
        reason: text(fields.get(reason_key)),
        data: fields.get(data_key).cloned().unwrap_or(Value::Null),
    })
}

/// `status:SUCCESS reason:Signal 1 received`: how Heat's signal event
/// describes a signal.
pub fn signal_reason(signal: &WaitSignal) -> String {
    format!("status:{} reason:{}", signal.status.as_str(), signal.reason)
}

/// Where a wait condition stands with the signals its handle holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WaitState {
    Waiting,
    Succeeded,
    /// A FAILURE signal arrived: the reasons of every failure, `;`-joined.
    Failed(String),
}

/// Heat's rule: any failure fails the wait condition; otherwise it is
/// complete once `count` signals (all successes) are in.
pub fn wait_state(signals: &[WaitSignal], count: u64) -> WaitState {
    let failures: Vec<&str> = signals
        .iter()
        .filter(|signal| signal.status == SignalStatus::Failure)
        .map(|signal| signal.reason.as_str())
        .collect();
    if !failures.is_empty() {
        return WaitState::Failed(failures.join(";"));
    }
    if signals.len() as u64 >= count {
        WaitState::Succeeded
    } else {
        WaitState::Waiting
    }
}

/// What a timed-out wait condition says: `1 of 3 received - reasons`.
pub fn timeout_reason(signals: &[WaitSignal], count: u64) -> String {
    let reasons: Vec<&str> = signals
        .iter()
        .filter(|signal| signal.status == SignalStatus::Success)
        .map(|signal| signal.reason.as_str())
        .collect();
    if reasons.is_empty() {
        format!("{} of {count} received", reasons.len())
    } else {
        format!(
            "{} of {count} received - {}",
            reasons.len(),
            reasons.join(";")
        )
    }
}

/// The wait condition's `data` attribute: each signal's data by its id,
/// as a JSON string (Heat's format).
pub fn data_attribute(signals: &[WaitSignal]) -> String {
    let data: Map<String, Value> = signals
        .iter()
        .map(|signal| (signal.unique_id.clone(), signal.data.clone()))
        .collect();
    Value::Object(data).to_string()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn stored(id: &str, status: SignalStatus, reason: &str) -> WaitSignal {
        WaitSignal {
            unique_id: id.to_owned(),
            status,
            reason: reason.to_owned(),
            data: json!(format!("data of {id}")),
        }
    }

    #[test]
    fn heat_signals_default_to_success_and_refuse_other_keys() {
        let empty = parse_signal(&Value::Null, HandleStyle::Heat).expect("null");
        assert_eq!(empty.status, SignalStatus::Success);
        assert_eq!((empty.unique_id, empty.reason), (None, None));
        let full = parse_signal(
            &json!({"status": "FAILURE", "reason": "disk full", "data": {"k": 1}, "id": 7}),
            HandleStyle::Heat,
        )
        .expect("full");
        assert_eq!(full.status, SignalStatus::Failure);
        assert_eq!(full.unique_id.as_deref(), Some("7"));
        assert_eq!(full.data, json!({"k": 1}));
        for bad in [
            json!({"status": "DONE"}),
            json!({"status": 1}),
            json!({"colour": "red"}),
            json!(["not", "an", "object"]),
        ] {
            let error = parse_signal(&bad, HandleStyle::Heat).expect_err("invalid");
            assert!(error.starts_with(INVALID_SIGNAL), "{error}");
        }
    }

    #[test]
    fn cloudformation_signals_need_their_four_keys() {
        let signal = parse_signal(
            &json!({"Status": "SUCCESS", "Reason": "ok", "UniqueId": "a", "Data": "x"}),
            HandleStyle::CloudFormation,
        )
        .expect("valid");
        assert_eq!(signal.unique_id.as_deref(), Some("a"));
        let error = parse_signal(
            &json!({"Status": "SUCCESS", "Reason": "ok", "Data": "x"}),
            HandleStyle::CloudFormation,
        )
        .expect_err("UniqueId missing");
        assert!(error.contains("UniqueId is missing"), "{error}");
        assert!(parse_signal(&json!({"status": "SUCCESS"}), HandleStyle::CloudFormation).is_err());
    }

    #[test]
    fn a_wait_condition_succeeds_at_its_count_and_fails_on_any_failure() {
        let one = stored("1", SignalStatus::Success, "Signal 1 received");
        let two = stored("2", SignalStatus::Success, "Signal 2 received");
        assert_eq!(wait_state(&[], 1), WaitState::Waiting);
        assert_eq!(
            wait_state(std::slice::from_ref(&one), 2),
            WaitState::Waiting
        );
        assert_eq!(
            wait_state(&[one.clone(), two.clone()], 2),
            WaitState::Succeeded
        );
        let broken = stored("3", SignalStatus::Failure, "disk full");
        assert_eq!(
            wait_state(&[one.clone(), broken], 1),
            WaitState::Failed("disk full".to_owned())
        );
        assert_eq!(timeout_reason(&[], 2), "0 of 2 received");
        assert_eq!(
            timeout_reason(std::slice::from_ref(&one), 2),
            "1 of 2 received - Signal 1 received"
        );
        assert_eq!(
            signal_reason(&one),
            "status:SUCCESS reason:Signal 1 received"
        );
        let data: Value =
            serde_json::from_str(&data_attribute(&[one, two])).expect("a JSON string");
        assert_eq!(data, json!({"1": "data of 1", "2": "data of 2"}));
    }
}
