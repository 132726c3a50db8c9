//! Wait conditions: `OS::Heat::WaitConditionHandle` (and
//! `OS::Heat::UpdateWaitConditionHandle`, `AWS::CloudFormation::
//! WaitConditionHandle`) receive signals from whatever the stack started —
//! a server's boot script, a deployment tool — and `OS::Heat::WaitCondition`
//! (`AWS::CloudFormation::WaitCondition`) holds its stack operation until
//! `count` successes arrived, fails at the first failure, or times out.
//!
//! A handle is signalled, without a user token, with the secret it was
//! created with: as `X-Auth-Token` on the handle's own Heat signal URL
//! (TOKEN_SIGNAL, Heat's default, so `curl_cli` works as in Heat), or in
//! the query of a signal URL Ember serves (TEMP_URL_SIGNAL, CFN_SIGNAL, and
//! the CloudFormation handle, whose reference is that URL). Signals are
//! stored beside the stack (see `store::signals`), and a waiting wait
//! condition is woken the moment one arrives on this engine (and checks
//! every [`POLL_INTERVAL`] for signals another replica took).
//!
//! Because signals are stored, a wait another engine had in flight when it
//! went away is taken over: the engine that resumes the operation waits
//! again, for what is left of the timeout counted from when the wait began
//! (signals that arrived meanwhile count). A handle's create makes nothing
//! anyone saw before it completed, and its delete clears stored signals:
//! both are redone.
//!
//! `waiters` is the service both share, `handle` and `condition` the two
//! kinds of resource type.

use std::time::Duration;

use serde_json::Value;

use crate::domain::Resource;
use crate::domain::wait_condition::HandleStyle;

mod condition;
mod handle;
mod waiters;

pub use condition::WaitCondition;
pub use handle::WaitConditionHandle;
pub use waiters::WaitConditions;

pub const HEAT_HANDLE_TYPE: &str = "OS::Heat::WaitConditionHandle";
pub const UPDATE_HANDLE_TYPE: &str = "OS::Heat::UpdateWaitConditionHandle";
pub const CFN_HANDLE_TYPE: &str = "AWS::CloudFormation::WaitConditionHandle";
pub const HEAT_WAIT_CONDITION_TYPE: &str = "OS::Heat::WaitCondition";
pub const CFN_WAIT_CONDITION_TYPE: &str = "AWS::CloudFormation::WaitCondition";

/// How often a waiting wait condition reads its signals even when nothing
/// woke it (a signal another engine replica stored).
const POLL_INTERVAL: Duration = Duration::from_millis(250);

/// Heat's breakpoint hook types.
pub const HOOK_TYPES: [&str; 6] = [
    "pre-create",
    "pre-update",
    "pre-delete",
    "post-create",
    "post-update",
    "post-delete",
];

/// Prefix of a handle's signal secret (the rest is 32 random bytes, hex):
/// lets the gateway tell it from a user's token.
pub const SIGNAL_TOKEN_PREFIX: &str = "ember-signal-";

/// The signal styles of the handle types, `None` for other types.
pub fn handle_style(type_name: &str) -> Option<HandleStyle> {
    match type_name {
        HEAT_HANDLE_TYPE => Some(HandleStyle::Heat),
        UPDATE_HANDLE_TYPE | CFN_HANDLE_TYPE => Some(HandleStyle::CloudFormation),
        _ => None,
    }
}

/// A new handle's signal secret: the prefix and 32 random bytes, hex.
pub(crate) fn new_signal_token() -> String {
    use rand::RngCore;
    let mut bytes = [0u8; 32];
    rand::rng().fill_bytes(&mut bytes);
    let hex: String = bytes.iter().map(|byte| format!("{byte:02x}")).collect();
    format!("{SIGNAL_TOKEN_PREFIX}{hex}")
}

/// The secret a handle's signals must carry, from its private data.
pub fn signal_token(handle: &Resource) -> Option<&str> {
    handle.data.get("token").and_then(Value::as_str)
}
