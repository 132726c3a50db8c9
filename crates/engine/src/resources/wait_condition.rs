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

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use serde_json::{Map, Value, json};
use tokio::sync::Notify;

use super::{
    AttributeSchema, PropertySchema, PropertyType, ResourceFailure, ResourceOutcome,
    ResourceRequest, ResourceType, ResourceTypeSchema,
};
use crate::domain::Resource;
use crate::domain::wait_condition::{
    HandleStyle, WaitState, data_attribute, timeout_reason, wait_state,
};
use crate::store::StackStore;
use crate::store::signals::WaitSignalStore;

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

/// What wait conditions and their handles share: the signal store, the
/// stacks (to find a handle), the waiters to wake, and the URL users reach
/// the gateway at.
pub struct WaitConditions {
    signals: Arc<dyn WaitSignalStore>,
    stacks: Arc<dyn StackStore>,
    waiters: Mutex<HashMap<String, Arc<Notify>>>,
    public_url: String,
}

impl WaitConditions {
    pub fn new(
        signals: Arc<dyn WaitSignalStore>,
        stacks: Arc<dyn StackStore>,
        public_url: &str,
    ) -> Arc<WaitConditions> {
        Arc::new(WaitConditions {
            signals,
            stacks,
            waiters: Mutex::default(),
            public_url: public_url.trim_end_matches('/').to_owned(),
        })
    }

    /// The URL users reach the gateway at.
    pub fn public_url(&self) -> &str {
        &self.public_url
    }

    pub fn signals(&self) -> &Arc<dyn WaitSignalStore> {
        &self.signals
    }

    /// The stacks, their resources and events (a deployment reads when
    /// its step began from them).
    pub(crate) fn stacks(&self) -> &Arc<dyn StackStore> {
        &self.stacks
    }

    /// Wakes the wait conditions waiting on `handle_id` (a signal arrived).
    pub fn wake(&self, handle_id: &str) {
        if let Ok(waiters) = self.waiters.lock()
            && let Some(notify) = waiters.get(handle_id)
        {
            notify.notify_waiters();
        }
    }

    fn waiter(&self, handle_id: &str) -> Arc<Notify> {
        match self.waiters.lock() {
            Ok(mut waiters) => waiters
                .entry(handle_id.to_owned())
                .or_insert_with(|| Arc::new(Notify::new()))
                .clone(),
            Err(_) => Arc::new(Notify::new()),
        }
    }

    fn forget_waiter(&self, handle_id: &str, notify: &Arc<Notify>) {
        if let Ok(mut waiters) = self.waiters.lock()
            && waiters
                .get(handle_id)
                .is_some_and(|current| Arc::ptr_eq(current, notify))
            && Arc::strong_count(notify) <= 2
        {
            waiters.remove(handle_id);
        }
    }

    /// Sets breakpoint `hook` of a resource: from now on a clear
    /// (`{"unset_hook": hook}` signalled to the resource, on any replica)
    /// finds it. [`Self::wait_at_breakpoint`] then holds the resource.
    pub async fn set_breakpoint(
        &self,
        stack_id: uuid::Uuid,
        resource: &str,
        hook: &str,
    ) -> crate::error::Result<()> {
        self.signals.set_breakpoint(stack_id, resource, hook).await
    }

    /// Holds a resource at breakpoint `hook` (set before) until someone
    /// clears it.
    pub async fn wait_at_breakpoint(
        &self,
        stack_id: uuid::Uuid,
        resource: &str,
        hook: &str,
    ) -> crate::error::Result<()> {
        self.wait_until(&breakpoint_key(stack_id, resource, hook), || async {
            let set = self
                .signals
                .breakpoint_is_set(stack_id, resource, hook)
                .await?;
            Ok((!set).then_some(()))
        })
        .await
    }

    /// Runs `check` until it gives a value: again whenever `key` is woken
    /// (on this engine) and every [`POLL_INTERVAL`] (for changes another
    /// replica made).
    pub async fn wait_until<T, F, Fut>(&self, key: &str, mut check: F) -> crate::error::Result<T>
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = crate::error::Result<Option<T>>>,
    {
        let notify = self.waiter(key);
        let outcome = loop {
            // Registered before checking, so a wake after the check still
            // ends this round.
            let woken = notify.notified();
            tokio::pin!(woken);
            woken.as_mut().enable();
            match check().await {
                Ok(Some(value)) => break Ok(value),
                Ok(None) => {}
                Err(error) => break Err(error),
            }
            tokio::select! {
                () = &mut woken => {}
                () = tokio::time::sleep(POLL_INTERVAL) => {}
            }
        };
        self.forget_waiter(key, &notify);
        outcome
    }

    /// Clears a breakpoint and wakes the resource paused at it; false when
    /// the resource was not paused there.
    pub async fn clear_breakpoint(
        &self,
        stack_id: uuid::Uuid,
        resource: &str,
        hook: &str,
    ) -> crate::error::Result<bool> {
        let cleared = self
            .signals
            .clear_breakpoint(stack_id, resource, hook)
            .await?;
        self.wake(&breakpoint_key(stack_id, resource, hook));
        Ok(cleared)
    }

    /// The Heat signal URL of a resource (TOKEN_SIGNAL's endpoint).
    pub(crate) fn resource_signal_url(&self, request: &ResourceRequest) -> String {
        format!(
            "{}/orchestration/v1/{}/stacks/{}/{}/resources/{}/signal",
            self.public_url,
            request.project_id,
            request.stack_name,
            request.stack_id,
            request.resource_name
        )
    }

    /// The URL that takes a handle's signals with the secret in its query.
    pub(crate) fn token_url(&self, stack_id: uuid::Uuid, handle_id: &str, token: &str) -> String {
        format!(
            "{}/orchestration/v1/signals/{stack_id}/{handle_id}?token={token}",
            self.public_url
        )
    }

    /// The handle a wait condition names: by its id (Heat's reference of
    /// its handle) or by its signal URL (the CloudFormation handle's).
    async fn find_handle(
        &self,
        stack_id: uuid::Uuid,
        reference: &str,
    ) -> Result<Resource, ResourceFailure> {
        let rows = self
            .stacks
            .list_resources(stack_id)
            .await
            .map_err(|error| ResourceFailure(error.to_string()))?;
        let by_url = reference
            .split_once("/signals/")
            .and_then(|(_, rest)| rest.split(['?', '#']).next())
            .and_then(|path| path.split_once('/'))
            .filter(|(stack, _)| *stack == stack_id.to_string())
            .map(|(_, handle)| handle.to_owned());
        rows.into_iter()
            .rev()
            .find(|row| {
                handle_style(&row.type_name).is_some()
                    && row
                        .physical_id
                        .as_deref()
                        .is_some_and(|id| id == reference || by_url.as_deref() == Some(id))
            })
            .ok_or_else(|| {
                ResourceFailure(format!(
                    "{} is not a valid wait condition handle.",
                    ember_runtime::quote::quoted(reference)
                ))
            })
    }

    /// Holds until the handle's signals decide: `count` successes (the
    /// `data` attribute's JSON), a failure, or `left` has passed.
    async fn wait(
        &self,
        stack_id: uuid::Uuid,
        handle_id: &str,
        count: u64,
        left: Duration,
    ) -> Result<String, ResourceFailure> {
        let deadline = tokio::time::Instant::now() + left;
        let notify = self.waiter(handle_id);
        let outcome = loop {
            // Registered before reading, so a signal stored after the read
            // still wakes this round.
            let woken = notify.notified();
            tokio::pin!(woken);
            woken.as_mut().enable();
            let signals = match self.signals.list_wait_signals(stack_id, handle_id).await {
                Ok(signals) => signals,
                Err(error) => break Err(ResourceFailure(error.to_string())),
            };
            match wait_state(&signals, count) {
                WaitState::Succeeded => break Ok(data_attribute(&signals)),
                WaitState::Failed(reasons) => break Err(ResourceFailure(reasons)),
                WaitState::Waiting => {}
            }
            if tokio::time::Instant::now() >= deadline {
                break Err(ResourceFailure(format!(
                    "WaitConditionTimeout: {}",
                    timeout_reason(&signals, count)
                )));
            }
            let next = (tokio::time::Instant::now() + POLL_INTERVAL).min(deadline);
            tokio::select! {
                () = &mut woken => {}
                () = tokio::time::sleep_until(next) => {}
            }
        };
        self.forget_waiter(handle_id, &notify);
        outcome
    }
}

fn breakpoint_key(stack_id: uuid::Uuid, resource: &str, hook: &str) -> String {
    format!("breakpoint:{stack_id}:{resource}:{hook}")
}

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

/// How a Heat handle's signals are sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Transport {
    Token,
    TempUrl,
    Cfn,
    Heat,
    None,
}

impl Transport {
    fn parse(text: &str) -> Result<Transport, ResourceFailure> {
        match text {
            "TOKEN_SIGNAL" => Ok(Transport::Token),
            "TEMP_URL_SIGNAL" => Ok(Transport::TempUrl),
            "CFN_SIGNAL" => Ok(Transport::Cfn),
            "HEAT_SIGNAL" => Ok(Transport::Heat),
            "NO_SIGNAL" => Ok(Transport::None),
            "ZAQAR_SIGNAL" => Err(ResourceFailure(
                "signal_transport ZAQAR_SIGNAL is not supported by Ember: use TOKEN_SIGNAL or TEMP_URL_SIGNAL".to_owned(),
            )),
            other => Err(ResourceFailure(format!(
                "signal_transport {other:?} is not one of TOKEN_SIGNAL, TEMP_URL_SIGNAL, CFN_SIGNAL, HEAT_SIGNAL, NO_SIGNAL"
            ))),
        }
    }
}

/// A wait condition handle, Heat's or CloudFormation's.
pub struct WaitConditionHandle {
    schema: ResourceTypeSchema,
    style: HandleStyle,
    /// `OS::Heat::UpdateWaitConditionHandle`: a new handle (and no signals)
    /// on every stack update.
    replaced_on_update: bool,
    conditions: Arc<WaitConditions>,
}

impl WaitConditionHandle {
    pub fn heat(conditions: Arc<WaitConditions>) -> Self {
        WaitConditionHandle {
            schema: ResourceTypeSchema {
                type_name: HEAT_HANDLE_TYPE,
                description: "Receives the signals a wait condition waits for: give it to what signals (a server's boot script) and send SUCCESS or FAILURE to it.",
                properties: vec![
                    PropertySchema::new(
                        "signal_transport",
                        PropertyType::String,
                        "How the client will signal the wait condition. TOKEN_SIGNAL: an HTTP POST to the handle's endpoint with its token as X-Auth-Token (see curl_cli). TEMP_URL_SIGNAL and CFN_SIGNAL: an HTTP POST or PUT to the URL in the signal attribute. HEAT_SIGNAL: the endpoint and token in the signal attribute. NO_SIGNAL: nothing can signal it.",
                    )
                    .default(json!("TOKEN_SIGNAL"))
                    .allowed_values(
                        [
                            "CFN_SIGNAL",
                            "TEMP_URL_SIGNAL",
                            "HEAT_SIGNAL",
                            "NO_SIGNAL",
                            "ZAQAR_SIGNAL",
                            "TOKEN_SIGNAL",
                        ]
                        .into_iter()
                        .map(|transport| json!(transport))
                        .collect(),
                    ),
                ],
                attributes: vec![
                    AttributeSchema {
                        name: "token",
                        description: "The token that signals the handle with TOKEN_SIGNAL (as X-Auth-Token); null for other transports.",
                    },
                    AttributeSchema {
                        name: "endpoint",
                        description: "The URL that takes the handle's signals with TOKEN_SIGNAL; null for other transports.",
                    },
                    AttributeSchema {
                        name: "curl_cli",
                        description: "A curl command that signals the handle with TOKEN_SIGNAL: add --data-binary '{\"status\": \"SUCCESS\"}' (or FAILURE); null for other transports.",
                    },
                    AttributeSchema {
                        name: "signal",
                        description: "JSON of what a client needs to signal the handle with the chosen transport.",
                    },
                ],
                accepts_any_properties: false,
                accepts_any_attributes: false,
            },
            style: HandleStyle::Heat,
            replaced_on_update: false,
            conditions,
        }
    }

    fn cloudformation(
        type_name: &'static str,
        replaced_on_update: bool,
        conditions: Arc<WaitConditions>,
    ) -> Self {
        WaitConditionHandle {
            schema: ResourceTypeSchema {
                type_name,
                description: "Receives the signals a wait condition waits for; its reference is the URL that takes them (an HTTP POST or PUT of {\"Status\", \"Reason\", \"UniqueId\", \"Data\"}).",
                properties: Vec::new(),
                attributes: Vec::new(),
                accepts_any_properties: false,
                accepts_any_attributes: false,
            },
            style: HandleStyle::CloudFormation,
            replaced_on_update,
            conditions,
        }
    }

    pub fn aws(conditions: Arc<WaitConditions>) -> Self {
        WaitConditionHandle::cloudformation(CFN_HANDLE_TYPE, false, conditions)
    }

    pub fn replaced_on_every_update(conditions: Arc<WaitConditions>) -> Self {
        WaitConditionHandle::cloudformation(UPDATE_HANDLE_TYPE, true, conditions)
    }
}

#[async_trait]
impl ResourceType for WaitConditionHandle {
    fn schema(&self) -> &ResourceTypeSchema {
        &self.schema
    }

    async fn create(&self, request: &ResourceRequest) -> Result<ResourceOutcome, ResourceFailure> {
        let handle_id = uuid::Uuid::new_v4().to_string();
        let token = new_signal_token();
        let token_url = self
            .conditions
            .token_url(request.stack_id, &handle_id, &token);
        let mut attributes = Map::new();
        if self.style == HandleStyle::Heat {
            let transport = Transport::parse(
                request
                    .properties
                    .get("signal_transport")
                    .and_then(Value::as_str)
                    .unwrap_or("TOKEN_SIGNAL"),
            )?;
            let endpoint = self.conditions.resource_signal_url(request);
            let (token_attribute, endpoint_attribute, curl, signal) = match transport {
                Transport::Token => (
                    json!(token),
                    json!(endpoint),
                    json!(format!(
                        "curl -i -X POST -H 'X-Auth-Token: {token}' -H 'Content-Type: application/json' -H 'Accept: application/json' {endpoint}"
                    )),
                    Value::Null,
                ),
                Transport::TempUrl | Transport::Cfn => (
                    Value::Null,
                    Value::Null,
                    Value::Null,
                    json!({ "alarm_url": token_url }),
                ),
                Transport::Heat => (
                    Value::Null,
                    Value::Null,
                    Value::Null,
                    json!({ "alarm_url": endpoint, "token": token }),
                ),
                Transport::None => (Value::Null, Value::Null, Value::Null, json!({})),
            };
            attributes.insert("token".to_owned(), token_attribute);
            attributes.insert("endpoint".to_owned(), endpoint_attribute);
            attributes.insert("curl_cli".to_owned(), curl);
            attributes.insert("signal".to_owned(), json!(signal.to_string()));
        }
        Ok(ResourceOutcome {
            physical_id: handle_id,
            attributes,
            data: json!({ "token": token, "url": token_url }),
        })
    }

    async fn update(
        &self,
        request: &ResourceRequest,
        current: &Resource,
    ) -> Result<ResourceOutcome, ResourceFailure> {
        // Only Heat's handle has a property (the transport): keep the
        // handle and its secret, as Heat does.
        let mut outcome = self.create(request).await?;
        if let Some(handle_id) = &current.physical_id {
            outcome.physical_id = handle_id.clone();
            outcome.data = current.data.clone();
        }
        Ok(outcome)
    }

    async fn delete(&self, current: &Resource) -> Result<(), ResourceFailure> {
        if let Some(handle_id) = &current.physical_id {
            self.conditions
                .signals
                .clear_wait_signals(current.stack_id, handle_id)
                .await
                .map_err(|error| ResourceFailure(error.to_string()))?;
        }
        Ok(())
    }

    fn needs_replacement(&self, old: &Map<String, Value>, new: &Map<String, Value>) -> bool {
        self.replaced_on_update || old.get("signal_transport") != new.get("signal_transport")
    }

    /// Every step is redone: a create's handle was seen by no one before
    /// it completed, and a delete clears what is stored, once or twice.
    fn take_over(&self, _step: crate::domain::StackAction) -> Result<(), String> {
        Ok(())
    }

    /// The CloudFormation handles are referred to by their signal URL.
    fn reference(&self, current: &Resource) -> Value {
        match self.style {
            HandleStyle::CloudFormation => current.data.get("url").cloned().unwrap_or(Value::Null),
            HandleStyle::Heat => current
                .physical_id
                .clone()
                .map_or(Value::Null, Value::String),
        }
    }
}

/// What is left of `timeout` at `now` for a wait that began at `began`
/// (none once it has passed: the signals are read once more, then it
/// times out).
fn remaining(
    timeout: Duration,
    began: chrono::DateTime<chrono::Utc>,
    now: chrono::DateTime<chrono::Utc>,
) -> Duration {
    let waited = (now - began).to_std().unwrap_or(Duration::ZERO);
    timeout.saturating_sub(waited)
}

/// A wait condition, Heat's or CloudFormation's (same rules, other
/// property and attribute names).
pub struct WaitCondition {
    schema: ResourceTypeSchema,
    keys: WaitConditionKeys,
    conditions: Arc<WaitConditions>,
}

struct WaitConditionKeys {
    handle: &'static str,
    timeout: &'static str,
    count: &'static str,
    data: &'static str,
}

impl WaitCondition {
    fn with_keys(
        type_name: &'static str,
        keys: WaitConditionKeys,
        conditions: Arc<WaitConditions>,
    ) -> Self {
        WaitCondition {
            schema: ResourceTypeSchema {
                type_name,
                description: "Holds the stack's operation until its handle received enough SUCCESS signals, fails it on a FAILURE signal or after the timeout.",
                properties: vec![
                    PropertySchema::new(
                        keys.handle,
                        PropertyType::String,
                        "A reference to the wait condition handle used to signal this wait condition.",
                    )
                    .required(),
                    PropertySchema::new(
                        keys.timeout,
                        PropertyType::Number,
                        "The number of seconds to wait for the correct number of signals to arrive.",
                    )
                    .required()
                    .range(1.0, 43200.0),
                    PropertySchema::new(
                        keys.count,
                        PropertyType::Integer,
                        "The number of success signals that must be received before the stack creation process continues.",
                    )
                    .default(json!(1))
                    .range(1.0, f64::from(u32::MAX))
                    .update_allowed(),
                ],
                attributes: vec![AttributeSchema {
                    name: keys.data,
                    description: "JSON string of the data of the signals the handle received, by signal id.",
                }],
                accepts_any_properties: false,
                accepts_any_attributes: false,
            },
            keys,
            conditions,
        }
    }

    pub fn heat(conditions: Arc<WaitConditions>) -> Self {
        WaitCondition::with_keys(
            HEAT_WAIT_CONDITION_TYPE,
            WaitConditionKeys {
                handle: "handle",
                timeout: "timeout",
                count: "count",
                data: "data",
            },
            conditions,
        )
    }

    pub fn aws(conditions: Arc<WaitConditions>) -> Self {
        WaitCondition::with_keys(
            CFN_WAIT_CONDITION_TYPE,
            WaitConditionKeys {
                handle: "Handle",
                timeout: "Timeout",
                count: "Count",
                data: "Data",
            },
            conditions,
        )
    }

    /// Waits for the handle's signals, for the timeout counted from
    /// `began` (now, unless the wait is taken over from an engine that
    /// went away: when it began then).
    async fn wait_for_signals(
        &self,
        request: &ResourceRequest,
        began: chrono::DateTime<chrono::Utc>,
    ) -> Result<ResourceOutcome, ResourceFailure> {
        let reference = request
            .properties
            .get(self.keys.handle)
            .and_then(Value::as_str)
            .unwrap_or_default();
        let handle = self
            .conditions
            .find_handle(request.stack_id, reference)
            .await?;
        let handle_id = handle.physical_id.clone().unwrap_or_default();
        let timeout = request
            .properties
            .get(self.keys.timeout)
            .and_then(Value::as_f64)
            .unwrap_or(1.0);
        let count = request
            .properties
            .get(self.keys.count)
            .and_then(Value::as_u64)
            .unwrap_or(1);
        let timeout = Duration::from_secs_f64(timeout.clamp(1.0, 43200.0));
        let data = self
            .conditions
            .wait(
                request.stack_id,
                &handle_id,
                count,
                remaining(timeout, began, ember_runtime::time::now()),
            )
            .await?;
        let mut attributes = Map::new();
        attributes.insert(self.keys.data.to_owned(), json!(data));
        Ok(ResourceOutcome {
            physical_id: request.physical_resource_name(),
            attributes,
            data: json!({ "handle": handle_id }),
        })
    }

    /// An update's wait: the wait condition keeps its physical id.
    async fn wait_again(
        &self,
        request: &ResourceRequest,
        current: &Resource,
        began: chrono::DateTime<chrono::Utc>,
    ) -> Result<ResourceOutcome, ResourceFailure> {
        let mut outcome = self.wait_for_signals(request, began).await?;
        if let Some(physical_id) = &current.physical_id {
            outcome.physical_id = physical_id.clone();
        }
        Ok(outcome)
    }
}

#[async_trait]
impl ResourceType for WaitCondition {
    fn schema(&self) -> &ResourceTypeSchema {
        &self.schema
    }

    async fn create(&self, request: &ResourceRequest) -> Result<ResourceOutcome, ResourceFailure> {
        self.wait_for_signals(request, ember_runtime::time::now())
            .await
    }

    async fn update(
        &self,
        request: &ResourceRequest,
        current: &Resource,
    ) -> Result<ResourceOutcome, ResourceFailure> {
        self.wait_again(request, current, ember_runtime::time::now())
            .await
    }

    /// Waits again, for what is left of the timeout since the wait began
    /// (when the engine that went away recorded the step in progress).
    async fn resume_create(
        &self,
        request: &ResourceRequest,
        in_flight: &Resource,
    ) -> Result<ResourceOutcome, ResourceFailure> {
        self.wait_for_signals(request, in_flight.updated_at).await
    }

    async fn resume_update(
        &self,
        request: &ResourceRequest,
        in_flight: &Resource,
    ) -> Result<ResourceOutcome, ResourceFailure> {
        self.wait_again(request, in_flight, in_flight.updated_at)
            .await
    }

    /// Signals are stored: a wait in flight is waited again (see the
    /// module's doc); a delete clears them, once or twice.
    fn take_over(&self, _step: crate::domain::StackAction) -> Result<(), String> {
        Ok(())
    }

    /// As Heat: the handle's signals go with the wait condition.
    async fn delete(&self, current: &Resource) -> Result<(), ResourceFailure> {
        if let Some(handle_id) = current.data.get("handle").and_then(Value::as_str) {
            self.conditions
                .signals
                .clear_wait_signals(current.stack_id, handle_id)
                .await
                .map_err(|error| ResourceFailure(error.to_string()))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_wait_taken_over_has_what_is_left_of_its_timeout() {
        let began = ember_runtime::time::now();
        let timeout = Duration::from_secs(10);
        let at = |seconds: i64| began + chrono::Duration::seconds(seconds);
        assert_eq!(remaining(timeout, began, at(0)), timeout);
        assert_eq!(remaining(timeout, began, at(4)), Duration::from_secs(6));
        assert_eq!(remaining(timeout, began, at(30)), Duration::ZERO);
        // A clock that went back does not lengthen the wait.
        assert_eq!(remaining(timeout, began, at(-5)), timeout);
    }
}
