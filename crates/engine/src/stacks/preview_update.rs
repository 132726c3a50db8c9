//! The update preview (Heat's `PUT|PATCH …/preview`): what an update with
//! this request would do to each resource, decided by the same rules the
//! update runs (a new type, a FAILED state or a change the type cannot
//! make in place replaces; other changes update in place), with nothing
//! taken or written.

use std::collections::BTreeSet;
use std::sync::Arc;

use ember_runtime::Identity;

use super::definition::ParsedStack;
use super::executor::{RunTarget, resolve_properties};
use super::update::{UpdateStack, updated_definition};
use super::{StackCaller, StackOperation, StackOperations};
use crate::domain::template::StackIdentity;
use crate::domain::{ActionStatus, Resource, StackAction};
use crate::error::{Error, Result};
use crate::store::LeaseFence;

/// What an update would do, by resource.
#[derive(Debug, Clone, Default)]
pub struct UpdatePreview {
    pub added: Vec<Resource>,
    pub deleted: Vec<Resource>,
    pub replaced: Vec<Resource>,
    pub updated: Vec<Resource>,
    pub unchanged: Vec<Resource>,
}

impl StackOperations {
    pub async fn preview_update(
        &self,
        identity: &Identity,
        request: &UpdateStack,
    ) -> Result<(crate::domain::Stack, UpdatePreview)> {
        let stack = self.find_stack(identity, &request.name_or_id).await?;
        self.admit(&stack, StackOperation::Update, StackCaller::User(identity))
            .await?;
        let current = self.store().load_definition(stack.id).await?;
        let definition = updated_definition(&current, request)?;
        let parsed = ParsedStack::build(
            &definition,
            StackIdentity {
                stack_name: stack.name.clone(),
                stack_id: stack.id.to_string(),
                project_id: stack.project_id.clone(),
            },
            &self.engine.registry,
        )?;
        let rows = self.store().list_resources(stack.id).await?;
        // Reads only: the fence is never written with.
        let target = RunTarget::new(&stack, Arc::new(parsed), rows, LeaseFence::at(stack.id, 0));
        let current_rows = super::executor::snapshot(&target.resources);
        let enabled: BTreeSet<String> = target.parsed.enabled.iter().cloned().collect();
        let mut preview = UpdatePreview::default();
        for name in &target.parsed.enabled {
            let new_type = target
                .parsed
                .resource_types
                .get(name)
                .cloned()
                .unwrap_or_default();
            let existing = current_rows
                .get(name)
                .filter(|row| row.action != StackAction::Init)
                .filter(|row| {
                    !(row.action == StackAction::Delete && row.status == ActionStatus::Complete)
                });
            let Some(row) = existing else {
                let type_name = target
                    .parsed
                    .template
                    .resources
                    .get(name)
                    .map(|definition| definition.resource_type.clone())
                    .unwrap_or_else(|| new_type.clone());
                preview.added.push(Resource::initial(
                    stack.id,
                    name,
                    &type_name,
                    ember_runtime::time::now(),
                ));
                continue;
            };
            let resource_type = self.engine.registry.get(&new_type).ok_or_else(|| {
                Error::InvalidInput(format!(
                    "resources.{name}: unknown resource type {new_type:?}"
                ))
            })?;
            let nested = resource_type.is_nested_stack();
            let failed = if nested {
                (row.action, row.status) == (StackAction::Check, ActionStatus::Failed)
            } else {
                row.status == ActionStatus::Failed
            };
            if row.type_name != new_type || failed || row.physical_id.is_none() {
                preview.replaced.push(row.clone());
                continue;
            }
            let old = row.properties.as_object().cloned().unwrap_or_default();
            match resolve_properties(&self.engine, &target, name, &new_type) {
                // What depends on something the update creates is decided
                // when that exists: it changes, at least in place.
                Err(_) => preview.updated.push(row.clone()),
                Ok(new) if resource_type.needs_replacement(&old, &new) => {
                    preview.replaced.push(row.clone())
                }
                Ok(new) if new != old || nested => preview.updated.push(row.clone()),
                Ok(_) => preview.unchanged.push(row.clone()),
            }
        }
        for (name, row) in &current_rows {
            let live = !(row.action == StackAction::Delete && row.status == ActionStatus::Complete);
            if live && !enabled.contains(name) {
                preview.deleted.push(row.clone());
            }
        }
        Ok((stack, preview))
    }
}
