//! Mark unhealthy (spec heat-mark-unhealthy): a user tells Ember that a
//! resource is broken in a way Ember cannot see. `true` makes it
//! CHECK_FAILED, so the next stack update replaces it (update.rs replaces
//! every failed resource; a nested stack is replaced as a whole when it is
//! the one marked). `false` undoes a mark — CHECK_FAILED becomes
//! CHECK_COMPLETE — and changes nothing else. The change holds the stack
//! lease only for one transaction, which also releases it: a busy stack
//! answers Conflict (Heat's ActionInProgress) and nothing changes.

use std::collections::BTreeMap;

use ember_runtime::Identity;

use super::{LeaseHolder, LeaseSeen, StackCaller, StackOperation, StackOperations};
use crate::domain::{ActionStatus, Event, Resource, Stack, StackAction};
use crate::error::{Error, Result};
use crate::store::{OperationStart, StartWrites};

/// Heat's reason when the caller gives none (an empty one counts as none).
pub const DEFAULT_HEALTH_REASON: &str = "state changed by resource_mark_unhealthy api";

/// The current row of each resource: the newest one of each name (older
/// ones were replaced and await retirement).
pub(crate) fn current_rows(rows: Vec<Resource>) -> BTreeMap<String, Resource> {
    let mut current: BTreeMap<String, Resource> = BTreeMap::new();
    for row in rows {
        let newer = current
            .get(&row.name)
            .is_none_or(|existing| (existing.created_at, existing.id) < (row.created_at, row.id));
        if newer {
            current.insert(row.name.clone(), row);
        }
    }
    current
}

/// A resource of `stack` by logical name, else by physical id (Heat's
/// rule); a physical id several resources share is refused.
pub(crate) fn find_resource(
    stack_name: &str,
    rows: Vec<Resource>,
    wanted: &str,
) -> Result<Resource> {
    if wanted.is_empty() {
        return Err(Error::InvalidInput(
            "resource: give a resource name or physical id".to_owned(),
        ));
    }
    let mut current = current_rows(rows);
    if let Some(resource) = current.remove(wanted) {
        return Ok(resource);
    }
    let mut matching: Vec<Resource> = current
        .into_values()
        .filter(|resource| resource.physical_id.as_deref() == Some(wanted))
        .collect();
    match matching.len() {
        0 => Err(Error::NotFound(format!(
            "resource {wanted:?} not found in stack {stack_name:?} (neither a resource name nor a physical id of one)"
        ))),
        1 => Ok(matching.remove(0)),
        _ => Err(Error::InvalidInput(format!(
            "physical id {wanted:?} is ambiguous in stack {stack_name:?}: resources {} have it; use the resource name",
            matching
                .iter()
                .map(|resource| format!("{:?}", resource.name))
                .collect::<Vec<_>>()
                .join(", ")
        ))),
    }
}

/// What marking does to `resource`: its new state, or None when nothing
/// changes (marking a resource being deleted; resetting one that is not
/// CHECK_FAILED).
pub(crate) fn health_change(
    resource: &Resource,
    mark_unhealthy: bool,
    reason: &str,
) -> Option<Resource> {
    let checked_failed =
        (resource.action, resource.status) == (StackAction::Check, ActionStatus::Failed);
    let status = if mark_unhealthy {
        if resource.action == StackAction::Delete {
            return None;
        }
        ActionStatus::Failed
    } else if checked_failed {
        ActionStatus::Complete
    } else {
        return None;
    };
    let mut changed = resource.clone();
    changed.action = StackAction::Check;
    changed.status = status;
    changed.status_reason = reason.to_owned();
    changed.updated_at = ember_runtime::time::now();
    Some(changed)
}

impl StackOperations {
    /// Marks a resource of `stack` (name or id; a nested stack is addressed
    /// like any other) unhealthy, or resets the mark. `resource` is the
    /// logical name or the physical id. Returns the resource as it is now.
    pub async fn mark_unhealthy(
        &self,
        identity: &Identity,
        stack: &str,
        resource: &str,
        mark_unhealthy: bool,
        reason: Option<String>,
    ) -> Result<Resource> {
        let (stack, lease_seen) = self.find_stack_with_free_lease(identity, stack).await?;
        let caller = StackCaller::User(identity);
        self.admit(&stack, StackOperation::MarkUnhealthy, caller)
            .await?;
        let found = find_resource(
            &stack.name,
            self.store().list_resources(stack.id).await?,
            resource,
        )?;
        let reason = reason
            .filter(|reason| !reason.trim().is_empty())
            .unwrap_or_else(|| DEFAULT_HEALTH_REASON.to_owned());

        // The usual case in one commit: the resource was read after the
        // lease was seen free, and the change is written — taking and
        // releasing the lease in the same transaction — only if no
        // operation took it in between.
        if let LeaseSeen::FreeAt(generation) = lease_seen {
            let Some(changed) = health_change(&found, mark_unhealthy, &reason) else {
                return Ok(found);
            };
            let start = OperationStart {
                generation,
                holder: uuid::Uuid::new_v4(),
                writes: StartWrites::ResourceHealth {
                    event: Event::for_resource(&changed, changed.updated_at),
                    resource: changed.clone(),
                },
            };
            let taken = self
                .engine
                .take_lease_at(stack.id, LeaseHolder::MarkUnhealthy, start)
                .await?;
            if taken.is_some() {
                log_marked(&stack, &changed);
                return Ok(changed);
            }
        }
        // Held for one transaction, which also releases it.
        let stack_lease = self
            .engine
            .take_lease(stack.id, &stack.name, LeaseHolder::MarkUnhealthy)
            .await?;
        // Under the lease: the state may have moved since it was read.
        let decided = async {
            let stack = self
                .store()
                .get_stack(stack.id)
                .await?
                .ok_or_else(|| Error::NotFound(format!("stack {:?} not found", stack.name)))?;
            self.admit(&stack, StackOperation::MarkUnhealthy, caller)
                .await?;
            let current = current_rows(self.store().list_resources(stack.id).await?)
                .remove(&found.name)
                .ok_or_else(|| {
                    Error::NotFound(format!(
                        "resource {:?} not found in stack {:?} (it was removed meanwhile)",
                        found.name, stack.name
                    ))
                })?;
            Ok::<_, Error>((
                current.clone(),
                health_change(&current, mark_unhealthy, &reason),
            ))
        };
        let ((current, change), stack_lease) = stack_lease.start(decided).await?;
        let Some(changed) = change else {
            stack_lease.release().await;
            return Ok(current);
        };
        let event = Event::for_resource(&changed, changed.updated_at);
        match self
            .store()
            .mark_resource_health(&changed, &event, stack_lease.fence())
            .await
        {
            Ok(()) => stack_lease.settle(),
            Err(error) => {
                // The write rolled back; a NotFound still released the lease.
                if matches!(error, Error::NotFound(_)) {
                    stack_lease.settle();
                } else {
                    stack_lease.release().await;
                }
                return Err(error);
            }
        }
        log_marked(&stack, &changed);
        Ok(changed)
    }
}

fn log_marked(stack: &Stack, changed: &Resource) {
    tracing::info!(
        stack_id = %stack.id,
        resource = %changed.name,
        status = %changed.resource_status(),
        "resource health marked"
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resource(
        name: &str,
        physical_id: &str,
        action: StackAction,
        status: ActionStatus,
    ) -> Resource {
        let mut resource = Resource::initial(
            uuid::Uuid::nil(),
            name,
            "OS::Heat::None",
            ember_runtime::time::now(),
        );
        resource.physical_id = Some(physical_id.to_owned());
        resource.action = action;
        resource.status = status;
        resource
    }

    #[test]
    fn resources_are_found_by_name_then_by_physical_id() {
        let rows = vec![
            resource("a", "id-1", StackAction::Create, ActionStatus::Complete),
            resource("b", "a", StackAction::Create, ActionStatus::Complete),
            resource("c", "shared", StackAction::Create, ActionStatus::Complete),
            resource("d", "shared", StackAction::Create, ActionStatus::Complete),
        ];
        assert_eq!(
            find_resource("web", rows.clone(), "a")
                .expect("by name")
                .name,
            "a"
        );
        assert_eq!(
            find_resource("web", rows.clone(), "id-1")
                .expect("by id")
                .name,
            "a"
        );
        let ambiguous = find_resource("web", rows.clone(), "shared").expect_err("ambiguous");
        assert!(matches!(ambiguous, Error::InvalidInput(_)), "{ambiguous:?}");
        assert!(
            ambiguous.to_string().contains("\"c\", \"d\""),
            "{ambiguous}"
        );
        let unknown = find_resource("web", rows, "nope").expect_err("unknown");
        assert!(matches!(unknown, Error::NotFound(_)), "{unknown:?}");
    }

    #[test]
    fn the_newest_row_of_a_name_is_the_current_one() {
        let old = resource("a", "old", StackAction::Create, ActionStatus::Complete);
        let mut new = resource("a", "new", StackAction::Create, ActionStatus::Complete);
        new.created_at = old.created_at + chrono::Duration::seconds(1);
        let current = current_rows(vec![new, old]);
        assert_eq!(current["a"].physical_id.as_deref(), Some("new"));
    }

    #[test]
    fn marks_follow_the_spec() {
        let complete = resource("a", "1", StackAction::Create, ActionStatus::Complete);
        let marked = health_change(&complete, true, "broken").expect("marked");
        assert_eq!(marked.resource_status(), "CHECK_FAILED");
        assert_eq!(marked.status_reason, "broken");
        let reset = health_change(&marked, false, "fixed").expect("reset");
        assert_eq!(reset.resource_status(), "CHECK_COMPLETE");
        assert_eq!(
            health_change(&complete, false, "x"),
            None,
            "only CHECK_FAILED is reset"
        );
        let failed = resource("a", "1", StackAction::Update, ActionStatus::Failed);
        assert_eq!(health_change(&failed, false, "x"), None);
        let deleting = resource("a", "1", StackAction::Delete, ActionStatus::Failed);
        assert_eq!(
            health_change(&deleting, true, "x"),
            None,
            "DELETE is left alone"
        );
    }
}
