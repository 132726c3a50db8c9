//! What plugins are shown of a stack: a read-only copy gathered from the
//! store, in the application's own types (the runner's proto messages are
//! made from it in `messages`, at the edge).

use std::collections::HashMap;

use serde_json::{Map, Value};
use uuid::Uuid;

use crate::domain::{ActionStatus, Resource, Stack, StackAction, StackDefinition};
use crate::stacks::definition::ParsedStack;
use crate::stacks::executor::StackEngine;

/// A read-only copy of a stack for plugins.
#[derive(Debug, Clone)]
pub(crate) struct PluginStackView {
    pub stack_id: Uuid,
    pub stack_name: String,
    pub project_id: String,
    pub user_id: String,
    pub template: Value,
    pub parameters: Map<String, Value>,
    pub resources: Vec<PluginResourceView>,
    pub nested_stacks: Vec<PluginStackView>,
    /// What the stack's tree will hold once its definition is in place,
    /// by resource type (the root only).
    pub planned_resources: HashMap<String, u64>,
}

/// One resource of a [`PluginStackView`].
#[derive(Debug, Clone)]
pub(crate) struct PluginResourceView {
    pub name: String,
    pub type_name: String,
    /// The resolved properties once created; the template's before.
    pub properties: Value,
    /// Heat's combined status, e.g. `CREATE_COMPLETE`.
    pub status: String,
    /// Empty when nothing was created.
    pub physical_id: String,
}

/// A read-only copy of the stack for plugins: its template and parameters,
/// its resources (created ones with their resolved properties, the others
/// with the template's), and its nested stacks, recursively.
pub(crate) async fn gather(engine: &StackEngine, stack: &Stack) -> PluginStackView {
    let mut root = stack_view(engine, stack).await;
    root.planned_resources = planned(engine, stack).await;
    add_nested_stacks(engine, &mut root).await;
    root
}

/// A root stack as it stood before an update replaced its definition and
/// added its new resources' rows — what plugins see as "previous". Kept as
/// the update read it, and turned into a view only when a plugin asks for
/// the snapshot (most operations meet no plugin).
pub(crate) struct PreviousStack<'a> {
    pub stack: &'a Stack,
    /// The stack's resource rows before the update.
    pub rows: &'a [Resource],
    pub definition: &'a StackDefinition,
    /// `definition` parsed (`None` when it no longer parses).
    pub parsed: Option<&'a ParsedStack>,
}

/// The view of [`PreviousStack`]'s stack. Its nested stacks are read now: an
/// update asks its plugins before it touches any resource, so they are
/// still as they were.
pub(crate) async fn gather_previous(
    engine: &StackEngine,
    previous_stack: PreviousStack<'_>,
) -> PluginStackView {
    let mut root = view_of(
        previous_stack.stack,
        previous_stack.definition.clone(),
        previous_stack.rows,
    );
    root.planned_resources = previous_stack
        .parsed
        .map(|parsed| {
            crate::stacks::planning::planned_resources(
                parsed,
                previous_stack.definition,
                &engine.registry,
            )
            .into_iter()
            .collect()
        })
        .unwrap_or_default();
    add_nested_stacks(engine, &mut root).await;
    root
}

/// Adds `root`'s nested stacks, recursively, read from the store.
async fn add_nested_stacks(engine: &StackEngine, root: &mut PluginStackView) {
    let mut pending: Vec<(Uuid, Vec<usize>)> = vec![(root.stack_id, Vec::new())];
    // Breadth-first over children; `path` locates each snapshot in the tree.
    while let Some((stack_id, path)) = pending.pop() {
        let Ok(children) = engine.store.list_child_stacks(stack_id).await else {
            continue;
        };
        for child in children {
            let child_snapshot = stack_view(engine, &child).await;
            let parent = path
                .iter()
                .fold(&mut *root, |node, index| &mut node.nested_stacks[*index]);
            parent.nested_stacks.push(child_snapshot);
            let mut child_path = path.clone();
            child_path.push(parent.nested_stacks.len() - 1);
            pending.push((child.id, child_path));
        }
    }
}

/// What the stack's tree will hold once its definition is in place (see
/// `planning`); empty when the stored definition no longer parses.
async fn planned(engine: &StackEngine, stack: &Stack) -> HashMap<String, u64> {
    let Ok(definition) = engine.store.load_definition(stack.id).await else {
        return Default::default();
    };
    let identity = crate::domain::template::StackIdentity {
        stack_name: stack.name.clone(),
        stack_id: stack.id.to_string(),
        project_id: stack.project_id.clone(),
    };
    match crate::stacks::definition::ParsedStack::build(&definition, identity, &engine.registry) {
        Ok(parsed) => {
            crate::stacks::planning::planned_resources(&parsed, &definition, &engine.registry)
                .into_iter()
                .collect()
        }
        Err(_) => Default::default(),
    }
}

async fn stack_view(engine: &StackEngine, stack: &Stack) -> PluginStackView {
    let definition = engine
        .store
        .load_definition(stack.id)
        .await
        .unwrap_or_default();
    let rows = engine
        .store
        .list_resources(stack.id)
        .await
        .unwrap_or_default();
    view_of(stack, definition, &rows)
}

/// The view of `stack` with `definition` and its resource `rows` (created
/// resources with their resolved properties, the others with the
/// template's; no nested stacks).
fn view_of(stack: &Stack, definition: StackDefinition, rows: &[Resource]) -> PluginStackView {
    let template_resources = definition
        .template
        .get("resources")
        .cloned()
        .unwrap_or(Value::Null);
    let mut resources: Vec<PluginResourceView> = Vec::new();
    for row in rows
        .iter()
        .filter(|row| !(row.action == StackAction::Delete && row.status == ActionStatus::Complete))
    {
        let properties = match &row.properties {
            Value::Object(map) if !map.is_empty() => row.properties.clone(),
            _ => template_resources
                .get(&row.name)
                .and_then(|resource| resource.get("properties"))
                .cloned()
                .unwrap_or(Value::Null),
        };
        resources.retain(|existing| existing.name != row.name);
        resources.push(PluginResourceView {
            name: row.name.clone(),
            type_name: row.type_name.clone(),
            properties,
            status: row.resource_status(),
            physical_id: row.physical_id.clone().unwrap_or_default(),
        });
    }
    PluginStackView {
        stack_id: stack.id,
        stack_name: stack.name.clone(),
        project_id: stack.project_id.clone(),
        user_id: stack.user_id.clone(),
        template: definition.template,
        parameters: definition.parameters,
        resources,
        nested_stacks: Vec::new(),
        planned_resources: HashMap::new(),
    }
}
