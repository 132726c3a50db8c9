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

use super::{LEASE_TTL, Operation, StackOperations, ensure_allowed};
use crate::domain::{ActionStatus, Event, Resource, Stack, StackAction};
use crate::error::{Error, Result};

/// Heat's reason when the caller gives none (an empty one counts as none).
pub const DEFAULT_HEALTH_REASON: &str = "state changed by resource_mark_unhealthy api";

/// How deep parents are followed up to the root (nested stacks stop at 5).
const MOST_ANCESTORS: usize = 16;

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
    /// The gate for `stack` and every stack above it: a nested stack is
    /// locked — or busy — with its root.
    pub(crate) async fn ensure_allowed_with_ancestors(
        &self,
        stack: &Stack,
        operation: Operation,
    ) -> Result<()> {
        ensure_allowed(stack, operation)?;
        let mut parent = stack.parent_id;
        for _ in 0..MOST_ANCESTORS {
            let Some(parent_id) = parent else {
                return Ok(());
            };
            let Some(ancestor) = self.store().get_stack(parent_id).await? else {
                return Ok(());
            };
            ensure_allowed(&ancestor, operation)?;
            parent = ancestor.parent_id;
        }
        Ok(())
    }

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
        let stack = self.find_stack(identity, stack).await?;
        self.ensure_allowed_with_ancestors(&stack, Operation::MarkUnhealthy)
            .await?;
        let found = find_resource(
            &stack.name,
            self.store().list_resources(stack.id).await?,
            resource,
        )?;
        let reason = reason
            .filter(|reason| !reason.trim().is_empty())
            .unwrap_or_else(|| DEFAULT_HEALTH_REASON.to_owned());

        let engine_id = self.shared.engine_id;
        let now = ember_runtime::time::now();
        let expires_at =
            now + chrono::Duration::from_std(LEASE_TTL).unwrap_or(chrono::Duration::seconds(30));
        // Held for one transaction: no heartbeat needed.
        if !self
            .store()
            .take_stack_lease(stack.id, engine_id, "MARK_UNHEALTHY", now, expires_at)
            .await?
        {
            return Err(Error::Conflict(format!(
                "stack {:?} is busy: another operation is in progress on it (try again when it finishes)",
                stack.name
            )));
        }
        // Under the lease: the state may have moved since it was read.
        let decided = async {
            let stack = self
                .store()
                .get_stack(stack.id)
                .await?
                .ok_or_else(|| Error::NotFound(format!("stack {:?} not found", stack.name)))?;
            ensure_allowed(&stack, Operation::MarkUnhealthy)?;
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
        }
        .await;
        match decided {
            Ok((_, Some(changed))) => {
                let event = Event::for_resource(&changed, changed.updated_at);
                let written = self
                    .store()
                    .mark_resource_health(&changed, &event, stack.id, engine_id)
                    .await;
                if let Err(error) = written {
                    self.release_lease_quietly(stack.id).await;
                    return Err(error);
                }
                tracing::info!(
                    stack_id = %stack.id,
                    resource = %changed.name,
                    status = %changed.resource_status(),
                    "resource health marked"
                );
                Ok(changed)
            }
            Ok((current, None)) => {
                self.release_lease_quietly(stack.id).await;
                Ok(current)
            }
            Err(error) => {
                self.release_lease_quietly(stack.id).await;
                Err(error)
            }
        }
    }

    /// Releases this engine's lease on a stack; it expires on its own if
    /// the database cannot be reached.
    async fn release_lease_quietly(&self, stack_id: uuid::Uuid) {
        if let Err(error) = self
            .store()
            .release_stack_lease(stack_id, self.shared.engine_id)
            .await
        {
            tracing::warn!(%stack_id, %error, "cannot release the stack lease");
        }
    }
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
