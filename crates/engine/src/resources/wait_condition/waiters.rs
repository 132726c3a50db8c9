//! The waiter service wait conditions and their handles share: stored
//! signals, the waiting conditions to wake, breakpoint keys.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::Notify;

use super::{POLL_INTERVAL, handle_style};
use crate::domain::Resource;
use crate::domain::wait_condition::{WaitState, data_attribute, timeout_reason, wait_state};
use crate::resources::{ResourceFailure, ResourceRequest};
use crate::store::StackStore;
use crate::store::signals::WaitSignalStore;

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
    pub(super) async fn find_handle(
        &self,
        stack_id: uuid::Uuid,
        reference: &str,
    ) -> Result<Resource, ResourceFailure> {
        let rows = self.stacks.list_resources(stack_id).await?;
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
                ResourceFailure::new(format!(
                    "{} is not a valid wait condition handle.",
                    ember_runtime::quote::quoted(reference)
                ))
            })
    }

    /// Holds until the handle's signals decide: `count` successes (the
    /// `data` attribute's JSON), a failure, or `left` has passed.
    pub(super) async fn wait(
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
                Err(error) => break Err(error.into()),
            };
            match wait_state(&signals, count) {
                WaitState::Succeeded => break Ok(data_attribute(&signals)),
                WaitState::Failed(reasons) => break Err(ResourceFailure::new(reasons)),
                WaitState::Waiting => {}
            }
            if tokio::time::Instant::now() >= deadline {
                break Err(ResourceFailure::new(format!(
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
