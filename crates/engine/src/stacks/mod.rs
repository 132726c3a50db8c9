//! Stack operations, the engine's application layer: each public method is
//! what one API call does. Changes run as background tasks holding the
//! stack lease; the call returns once the operation is recorded as started.

mod abandon;
mod actions;
mod bounds;
mod breakpoints;
mod context;
mod create;
pub mod definition;
mod delete;
mod executor;
mod failure;
mod lease;
mod maintenance_lock;
mod mark_unhealthy;
mod nested;
mod orphans;
mod planning;
mod plugins;
mod preview;
mod preview_update;
mod queries;
mod remote;
mod run_end;
mod signal;
mod snapshots;
mod update;
mod validation;
mod writer;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use ember_runtime::Identity;
use serde_json::{Map, Value};
use uuid::Uuid;

pub use crate::domain::admission::{StackCaller, StackOperation};
pub use bounds::{DEFAULT_ACTION_TIMEOUT, Stops};
pub use definition::{DefinitionInput, ParsedStack, definition_from_input};
use executor::{RunTarget, StackEngine};
pub(crate) use lease::LeaseSeen;
pub use lease::{LEASE_TTL, LeaseHolder, StackBusy, StackLease};
pub use maintenance_lock::OperationCheck;
pub use mark_unhealthy::DEFAULT_HEALTH_REASON;
pub use orphans::Swept;
pub use plugins::{PluginGate, RegistryUnavailable};
pub use preview::Preview;
pub use preview_update::UpdatePreview;
pub use queries::{OutputValue, ResourceView, StackDetails};
pub(crate) use run_end::{
    complete_or_fail, conclude, end, final_state, finish, stop_without_final_state,
};
pub use signal::{Scaling, SignalOutcome};
pub use update::UpdateStack;
pub use validation::ValidationReport;
pub use writer::{TakeRecord, TransitionWriter};

use crate::domain::template::{StackIdentity, TemplateError};
use crate::domain::{Event, Resource, Stack};
use crate::error::{Error, Result};
use crate::resources::ResourceTypeRegistry;
use crate::store::StackStore;

/// An operation's background work: spawned for API calls, awaited for
/// nested stacks (their parent's resource waits for them).
pub(crate) type Run = std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>>;

/// A request to create a stack, decoded from REST or gRPC.
#[derive(Debug, Clone, Default)]
pub struct CreateStack {
    pub name: String,
    pub template: String,
    pub environment: String,
    pub environment_files: Vec<String>,
    pub files: BTreeMap<String, String>,
    pub parameters: Map<String, Value>,
    pub timeout_mins: Option<u32>,
    pub disable_rollback: bool,
    pub tags: Vec<String>,
    /// Abandon data (JSON text): adopt those resources instead of creating.
    pub adopt_data: Option<String>,
}

pub struct StackOperations {
    engine: Arc<StackEngine>,
}

/// How stack operations run.
pub struct StackSettings {
    /// The lifecycle plugins called around every root operation.
    pub plugins: PluginGate,
    /// How long a stack lease lives without its heartbeat: after a crash,
    /// the stacks the engine was working on are failed by the sweep once
    /// this has passed.
    pub lease_ttl: Duration,
    /// How long an operation runs on a stack without `timeout_mins`
    /// (Heat's `stack_action_timeout`).
    pub action_timeout: Duration,
    /// The region of Ember's catalog (see `remote.rs`).
    pub region: String,
    /// The engine process these operations run in: it holds the stack
    /// leases it takes under this id. One per process, shared with the
    /// clustering service (see `crate::serve`).
    pub engine_id: Uuid,
    /// The quotas creates and updates are checked against; `None` (unit
    /// tests) checks none.
    pub quotas: Option<Arc<crate::quotas::Quotas>>,
    /// Where locks, refusals and break-glass are recorded; `None` (unit
    /// tests) records nothing and honours no break-glass.
    pub audit: Option<Arc<crate::audit::AuditTrail>>,
    /// The cloud of the openstack backend: root stacks are made with a
    /// delegation to act on it through (see `crate::cloud`), and deleted
    /// with it; `None` on the other backends.
    pub cloud: Option<Arc<crate::cloud::OpenStackCloud>>,
}

impl Default for StackSettings {
    /// No plugins, the default lease, a new engine id (a process of its
    /// own, as tests want), and neither quotas, audit trail nor cloud.
    fn default() -> Self {
        StackSettings {
            plugins: PluginGate::Disabled,
            lease_ttl: LEASE_TTL,
            action_timeout: bounds::DEFAULT_ACTION_TIMEOUT,
            region: "RegionOne".to_owned(),
            engine_id: Uuid::now_v7(),
            quotas: None,
            audit: None,
            cloud: None,
        }
    }
}

impl From<TemplateError> for Error {
    fn from(error: TemplateError) -> Self {
        Error::InvalidInput(error.to_string())
    }
}

pub(crate) fn stack_event(stack: &Stack, reason: &str) -> Event {
    Event::for_stack(stack, reason, ember_runtime::time::now())
}

impl StackOperations {
    /// The engine's stack operations. They also host nested stacks, so the
    /// registry's nested stack types are bound to the returned instance.
    pub fn new(
        store: Arc<dyn StackStore>,
        registry: Arc<ResourceTypeRegistry>,
    ) -> Arc<StackOperations> {
        StackOperations::with_plugins(store, registry, PluginGate::Disabled)
    }

    /// The same, calling lifecycle plugins around every root operation.
    pub fn with_plugins(
        store: Arc<dyn StackStore>,
        registry: Arc<ResourceTypeRegistry>,
        plugins: PluginGate,
    ) -> Arc<StackOperations> {
        StackOperations::configured(
            store,
            registry,
            StackSettings {
                plugins,
                ..StackSettings::default()
            },
        )
    }

    /// The engine's stack operations with every setting given.
    pub fn configured(
        store: Arc<dyn StackStore>,
        registry: Arc<ResourceTypeRegistry>,
        settings: StackSettings,
    ) -> Arc<StackOperations> {
        let StackSettings {
            plugins,
            lease_ttl,
            action_timeout,
            region,
            engine_id,
            quotas,
            audit,
            cloud,
        } = settings;
        let writer = writer::TransitionWriter::start(store.clone());
        Arc::new_cyclic(|this: &std::sync::Weak<StackOperations>| {
            let host: std::sync::Weak<dyn crate::resources::NestedStackHost> = this.clone();
            registry.install_nested_stack_host(host);
            StackOperations {
                engine: Arc::new(StackEngine {
                    store,
                    registry,
                    writer,
                    engine_id,
                    plugins,
                    lease_ttl,
                    action_timeout,
                    region,
                    stops: Default::default(),
                    quotas,
                    audit: crate::audit::Auditing::new(audit),
                    parsed_cache: Default::default(),
                    draining: Default::default(),
                    runs: Default::default(),
                    cloud,
                }),
            }
        })
    }

    pub fn engine_id(&self) -> Uuid {
        self.engine.engine_id
    }

    /// Resource transitions queued for the next group commit.
    pub fn transitions_waiting(&self) -> usize {
        self.engine.writer.waiting()
    }

    /// The quota checks of a stack about to hold `resources` resources;
    /// a new root stack (`new_root`) also counts against the project's
    /// stacks, and every root operation against its concurrent operations.
    pub(crate) async fn admit_quotas(
        &self,
        stack: &Stack,
        resources: u64,
        new_root: bool,
    ) -> Result<()> {
        use crate::domain::quota::QuotaKind;
        use crate::store::quotas::Usage;
        let Some(quotas) = self.engine.quotas.as_ref() else {
            return Ok(());
        };
        let project = stack.project_id.as_str();
        if new_root && stack.parent_id.is_none() {
            return quotas.admit_stack_create(project, resources).await;
        }
        quotas
            .admit_size(project, QuotaKind::ResourcesPerStack, resources)
            .await?;
        if stack.parent_id.is_none() {
            quotas
                .admit(
                    project,
                    QuotaKind::ConcurrentOperations,
                    Usage::RunningOperations,
                    1,
                )
                .await?;
        }
        Ok(())
    }

    /// How many resources the tree `parsed` will hold, counted before
    /// anything is made: its own, its groups' members and its nested
    /// stacks' (see [`planning`]), as Heat's `max_resources_per_stack`
    /// counts the whole tree.
    pub(crate) fn tree_size(
        &self,
        parsed: &ParsedStack,
        definition: &crate::domain::StackDefinition,
    ) -> u64 {
        let planned = planning::total(&planning::planned_resources(
            parsed,
            definition,
            &self.engine.registry,
        ));
        planned.max(u64::try_from(parsed.enabled.len()).unwrap_or(u64::MAX))
    }

    /// The deepest nesting the quotas of `project_id` allow.
    pub(crate) async fn nesting_limit(&self, project_id: &str) -> Result<u32> {
        let limit = match self.engine.quotas.as_ref() {
            Some(quotas) => quotas.limits(project_id).await?.nested_depth,
            None => u64::from(crate::resources::MAX_NESTED_DEPTH),
        };
        Ok(u32::try_from(limit)
            .unwrap_or(u32::MAX)
            .min(crate::resources::MAX_NESTED_DEPTH))
    }

    pub fn registry(&self) -> &ResourceTypeRegistry {
        &self.engine.registry
    }

    fn store(&self) -> &Arc<dyn StackStore> {
        &self.engine.store
    }

    /// A stack of the caller's project by name or id, or NotFound.
    pub async fn find_stack(&self, identity: &Identity, name_or_id: &str) -> Result<Stack> {
        require_name_or_id(name_or_id)?;
        self.store()
            .find_stack(&identity.project_id, name_or_id)
            .await?
            .ok_or_else(|| not_found(name_or_id))
    }

    /// As [`Self::find_stack`], with the generation its lease was free at
    /// as the stack was read (see [`StackStore::find_stack_with_free_lease`]).
    async fn find_stack_with_free_lease(
        &self,
        identity: &Identity,
        name_or_id: &str,
    ) -> Result<(Stack, LeaseSeen)> {
        require_name_or_id(name_or_id)?;
        let (stack, free_at) = self
            .store()
            .find_stack_with_free_lease(
                &identity.project_id,
                name_or_id,
                ember_runtime::time::now(),
            )
            .await?
            .ok_or_else(|| not_found(name_or_id))?;
        let seen = match free_at {
            Some(generation) => LeaseSeen::FreeAt(generation),
            None => LeaseSeen::NotFree,
        };
        Ok((stack, seen))
    }

    /// Whether `operation` may start on `stack` now for `caller`: the
    /// admission rules of `domain::admission`, with the stacks above a
    /// nested stack read for users. Asked before the lease is taken (a
    /// refusal costs no lease) and again under it.
    ///
    /// A user's refusal is recorded in the audit trail, and an admin's
    /// break-glass honoured there ([`crate::audit::Auditing::admitted`]).
    pub(crate) async fn admit(
        &self,
        stack: &Stack,
        operation: StackOperation,
        caller: StackCaller<'_>,
    ) -> Result<()> {
        let (blockers, _) = self.blockers(stack, operation, caller).await?;
        // The engine's own operations on nested stacks are not a user's
        // asking: only a user's refusals and break-glass are recorded.
        let StackCaller::User(user) = caller else {
            return crate::domain::admission::first(&blockers);
        };
        self.engine
            .audit
            .admitted(
                crate::audit::Asked {
                    caller: user,
                    operation: operation.as_str(),
                },
                || Some(stack_audit_subject(stack)),
                &blockers,
                crate::domain::admission::stack::BREAKABLE_BY_GLASS.contains(&operation),
            )
            .await
    }

    /// Admission's blockers alone (nothing recorded, no break-glass), with
    /// the ancestors it read: what the dry run and the engine's own
    /// operations (an expiry) ask; the first is the refusal.
    pub(crate) async fn blockers(
        &self,
        stack: &Stack,
        operation: StackOperation,
        caller: StackCaller<'_>,
    ) -> Result<(Vec<crate::domain::admission::Blocker>, Vec<Stack>)> {
        let ancestors = match caller {
            StackCaller::User(_) if stack.parent_id.is_some() => self.ancestors(stack).await?,
            _ => Vec::new(),
        };
        let blockers =
            crate::domain::admission::blockers(crate::domain::admission::Subject::Stack {
                stack,
                ancestors: &ancestors,
                operation,
                caller,
            });
        Ok((blockers, ancestors))
    }

    /// The stacks above `stack`, nearest first.
    async fn ancestors(&self, stack: &Stack) -> Result<Vec<Stack>> {
        let mut ancestors = Vec::new();
        let mut parent = stack.parent_id;
        while let Some(parent_id) = parent {
            if ancestors.len() > crate::resources::MAX_NESTED_DEPTH as usize {
                break;
            }
            let Some(ancestor) = self.store().get_stack(parent_id).await? else {
                break;
            };
            parent = ancestor.parent_id;
            ancestors.push(ancestor);
        }
        Ok(ancestors)
    }

    /// The parsed definition and current resources of a recorded stack.
    pub(crate) async fn load_target(
        &self,
        stack: &Stack,
        fence: crate::store::LeaseFence,
    ) -> Result<RunTarget> {
        let rows = self.store().list_resources(stack.id).await?;
        self.target_of(stack, rows, fence).await
    }

    /// What a run acts on: `stack` with its resource `rows`.
    async fn target_of(
        &self,
        stack: &Stack,
        rows: Vec<Resource>,
        fence: crate::store::LeaseFence,
    ) -> Result<RunTarget> {
        let parsed = self.parse_recorded(stack).await?;
        Ok(RunTarget::new(stack, parsed, rows, fence))
    }

    /// Reads `stack_id` for an operation about to start under the lease
    /// `fence` (held, or about to be taken only if no operation took it
    /// since this read began): checks `operation` against it, and loads
    /// what a run of it acts on; the stack and its resources are read at
    /// once.
    pub(crate) async fn read_target(
        &self,
        stack_id: Uuid,
        name_or_id: &str,
        operation: StackOperation,
        caller: StackCaller<'_>,
        fence: crate::store::LeaseFence,
    ) -> Result<(Stack, RunTarget)> {
        let (stack, rows) = tokio::try_join!(
            self.store().get_stack(stack_id),
            self.store().list_resources(stack_id)
        )?;
        let stack =
            stack.ok_or_else(|| Error::NotFound(format!("stack {name_or_id:?} not found")))?;
        self.admit(&stack, operation, caller).await?;
        let target = self.target_of(&stack, rows, fence).await?;
        Ok((stack, target))
    }

    /// The stack's stored definition, parsed — from memory when its
    /// definition is the one last parsed (`definition_version`: state
    /// changes leave it alone), so a status read does not read and parse
    /// the template each time.
    async fn parse_recorded(&self, stack: &Stack) -> Result<Arc<ParsedStack>> {
        if let Some(parsed) = self
            .engine
            .parsed_cache
            .get(stack.id, stack.definition_version)
        {
            return Ok(parsed);
        }
        // The version read with the definition: an update may have given
        // the stack a new one since `stack` was read.
        let (definition, version) = self.store().load_versioned_definition(stack.id).await?;
        let parsed = ParsedStack::build(
            &definition,
            StackIdentity {
                stack_name: stack.name.clone(),
                stack_id: stack.id.to_string(),
                project_id: stack.project_id.clone(),
            },
            &self.engine.registry,
        )
        .map_err(|error| {
            Error::Database(format!(
                "stack {}: its stored template no longer parses: {error}",
                stack.id
            ))
        })?;
        let parsed = Arc::new(parsed);
        self.engine
            .parsed_cache
            .put(stack.id, version, parsed.clone());
        Ok(parsed)
    }
}

/// Refuses an empty stack name or id.
fn require_name_or_id(name_or_id: &str) -> Result<()> {
    if name_or_id.is_empty() {
        return Err(Error::InvalidInput(
            "stack: give a stack name or id".to_owned(),
        ));
    }
    Ok(())
}

fn not_found(name_or_id: &str) -> Error {
    Error::NotFound(format!("stack {name_or_id:?} not found"))
}

/// What the audit trail says a record about `stack` is about.
pub(crate) fn stack_audit_subject(stack: &Stack) -> crate::domain::audit::AuditSubject {
    crate::domain::audit::AuditSubject {
        target: crate::domain::audit::AuditTarget::Stack,
        id: stack.id.to_string(),
        name: stack.name.clone(),
        project_id: stack.project_id.clone(),
    }
}
