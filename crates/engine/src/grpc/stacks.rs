//! `StackService`: thin handlers over [`StackOperations`].

use std::sync::Arc;

use ember_proto::engine::v1 as pb;
use ember_runtime::ids::parse_optional_uuid;
use serde_json::Value;
use tonic::{Request, Response, Status};

use super::convert::{
    json_to_proto, map_to_struct, stack_into_proto, stack_to_proto, struct_to_map, value_to_struct,
};
use super::{Reply, answer};
use crate::domain::stack::StackListQuery;
use crate::domain::template::{TemplateVersion, template_functions};
use crate::domain::{LockLevel, StackWideAction};
use crate::error::Error;
use crate::stacks::{
    CreateStack, DefinitionInput, OutputValue, StackDetails, StackOperation, StackOperations,
    UpdateStack,
};

pub struct StackHandler {
    operations: Arc<StackOperations>,
}

impl StackHandler {
    pub fn new(operations: Arc<StackOperations>) -> Self {
        StackHandler { operations }
    }
}

fn create_request(request: pb::CreateStackRequest) -> CreateStack {
    CreateStack {
        name: request.stack_name,
        template: request.template,
        environment: request.environment,
        environment_files: request.environment_files,
        files: request.files.into_iter().collect(),
        parameters: request
            .parameters
            .as_ref()
            .map(struct_to_map)
            .unwrap_or_default(),
        timeout_mins: (request.timeout_mins > 0).then_some(request.timeout_mins),
        // Heat's default: a failed create is left for inspection.
        disable_rollback: request.disable_rollback.unwrap_or(true),
        tags: request.tags,
        adopt_data: (!request.adopt_stack_data.is_empty()).then_some(request.adopt_stack_data),
    }
}

fn output_to_proto(output: &OutputValue) -> pb::Output {
    let (output_value, output_error) = match &output.value {
        Ok(value) => (Some(json_to_proto(value)), String::new()),
        Err(error) => (None, error.clone()),
    };
    pb::Output {
        output_key: output.key.clone(),
        description: output.description.clone(),
        output_value,
        output_error,
    }
}

fn details_to_proto(details: &StackDetails) -> pb::Stack {
    pb::Stack {
        parameters: Some(map_to_struct(&details.parameters)),
        outputs: details.outputs.iter().map(output_to_proto).collect(),
        template_description: details.template_description.clone(),
        ..stack_to_proto(&details.stack)
    }
}

#[tonic::async_trait]
impl pb::stack_service_server::StackService for StackHandler {
    async fn create_stack(&self, request: Request<pb::CreateStackRequest>) -> Reply<pb::Stack> {
        let subject_token = ember_runtime::identity::SubjectToken::of(&request).cloned();
        answer(
            request,
            |caller, request| async move {
                let stack = self
                    .operations
                    .create_stack_delegating(
                        &caller,
                        subject_token.as_ref(),
                        create_request(request),
                    )
                    .await?;
                tracing::info!(stack_id = %stack.id, stack = %stack.name, "stack create started");
                Ok(stack)
            },
            |stack| stack_to_proto(&stack),
        )
        .await
    }

    async fn preview_stack(
        &self,
        request: Request<pb::CreateStackRequest>,
    ) -> Reply<pb::StackPreview> {
        answer(
            request,
            |caller, request| async move {
                self.operations
                    .preview_stack(&caller, &create_request(request))
            },
            |(stack, preview)| preview_to_proto(&stack, &preview),
        )
        .await
    }

    async fn get_stack(&self, request: Request<pb::GetStackRequest>) -> Reply<pb::Stack> {
        answer(
            request,
            |caller, request| async move {
                let stack = self.operations.find_stack(&caller, &request.stack).await?;
                self.operations.stack_details(stack).await
            },
            |details| details_to_proto(&details),
        )
        .await
    }

    async fn lock_stack(&self, request: Request<pb::LockStackRequest>) -> Reply<pb::Stack> {
        answer(
            request,
            |caller, request| async move {
                let level = match request.level.as_str() {
                    "" => LockLevel::All,
                    text => LockLevel::parse(text).ok_or_else(|| {
                        Error::InvalidInput(format!("level {text:?} is not one of stacks, all"))
                    })?,
                };
                let reason = (!request.reason.is_empty()).then_some(request.reason);
                let expires_at =
                    super::convert::lock_expiry(request.expires_in, request.expires_at.as_ref())?;
                let stack = self
                    .operations
                    .lock_stack_until(&caller, &request.stack, level, reason, expires_at)
                    .await?;
                tracing::info!(stack_id = %stack.id, level = level.as_str(), "stack lock started");
                Ok(stack)
            },
            |stack| stack_to_proto(&stack),
        )
        .await
    }

    async fn unlock_stack(&self, request: Request<pb::GetStackRequest>) -> Reply<pb::Stack> {
        answer(
            request,
            |caller, request| async move {
                let stack = self
                    .operations
                    .unlock_stack(&caller, &request.stack)
                    .await?;
                tracing::info!(stack_id = %stack.id, "stack unlock started");
                Ok(stack)
            },
            |stack| stack_to_proto(&stack),
        )
        .await
    }

    async fn check_operation(
        &self,
        request: Request<pb::CheckOperationRequest>,
    ) -> Reply<pb::CheckOperationResponse> {
        answer(
            request,
            |caller, request| async move {
                let operation = StackOperation::parse(&request.operation).ok_or_else(|| {
                    Error::InvalidInput(format!(
                        "operation {:?} is not one of update, delete, abandon, suspend, resume, check, cancel_update, signal, mark_unhealthy, lock, unlock",
                        request.operation
                    ))
                })?;
                self.operations
                    .check_operation(&caller, &request.stack, operation)
                    .await
            },
            |check| {
                let (allowed, reason, blockers) = super::convert::dry_run_verdict(&check.blockers);
                pb::CheckOperationResponse {
                    allowed,
                    reason,
                    blockers,
                    break_glass_would_pass: check.break_glass_would_pass,
                    stack_lock: check
                        .lock
                        .as_ref()
                        .map(super::convert::maintenance_lock_to_proto),
                }
            },
        )
        .await
    }

    async fn identify_stack(&self, request: Request<pb::GetStackRequest>) -> Reply<pb::Stack> {
        answer(
            request,
            |caller, request| async move {
                self.operations.find_stack(&caller, &request.stack).await
            },
            |stack| stack_to_proto(&stack),
        )
        .await
    }

    async fn list_stacks(
        &self,
        request: Request<pb::ListStacksRequest>,
    ) -> Reply<pb::ListStacksResponse> {
        answer(
            request,
            |caller, request| async move {
                let query = StackListQuery {
                    limit: request.limit,
                    marker: parse_optional_uuid("marker", &request.marker)?,
                    name: (!request.name.is_empty()).then_some(request.name),
                    show_nested: request.show_nested,
                    locked: request.locked,
                };
                let stacks = self.operations.list_stacks(&caller, &query).await?;
                let full_page = stacks.len() == query.page_size() as usize;
                Ok((stacks, full_page))
            },
            |(stacks, full_page)| {
                let next_marker = if full_page {
                    stacks
                        .last()
                        .map(|stack| stack.id.to_string())
                        .unwrap_or_default()
                } else {
                    String::new()
                };
                pb::ListStacksResponse {
                    stacks: stacks.into_iter().map(stack_into_proto).collect(),
                    next_marker,
                }
            },
        )
        .await
    }

    async fn update_stack(&self, request: Request<pb::UpdateStackRequest>) -> Reply<pb::Stack> {
        answer(
            request,
            |caller, request| async move {
                let stack = self
                    .operations
                    .update_stack(&caller, update_of(request))
                    .await?;
                tracing::info!(stack_id = %stack.id, stack = %stack.name, "stack update started");
                Ok(stack)
            },
            |stack| stack_to_proto(&stack),
        )
        .await
    }

    async fn delete_stack(&self, request: Request<pb::GetStackRequest>) -> Reply<pb::Stack> {
        answer(
            request,
            |caller, request| async move {
                let stack = self
                    .operations
                    .delete_stack(&caller, &request.stack)
                    .await?;
                tracing::info!(stack_id = %stack.id, stack = %stack.name, "stack delete started");
                Ok(stack)
            },
            |stack| stack_to_proto(&stack),
        )
        .await
    }

    async fn abandon_stack(
        &self,
        request: Request<pb::GetStackRequest>,
    ) -> Reply<pb::AbandonStackResponse> {
        answer(
            request,
            |caller, request| async move {
                self.operations.abandon_stack(&caller, &request.stack).await
            },
            |data| pb::AbandonStackResponse {
                data: Some(value_to_struct(&data)),
            },
        )
        .await
    }

    async fn export_stack(
        &self,
        request: Request<pb::GetStackRequest>,
    ) -> Reply<pb::AbandonStackResponse> {
        answer(
            request,
            |caller, request| async move {
                self.operations.export_stack(&caller, &request.stack).await
            },
            |data| pb::AbandonStackResponse {
                data: Some(value_to_struct(&data)),
            },
        )
        .await
    }

    async fn create_snapshot(
        &self,
        request: Request<pb::CreateSnapshotRequest>,
    ) -> Reply<pb::StackSnapshot> {
        answer(
            request,
            |caller, request| async move {
                let snapshot = self
                    .operations
                    .snapshot_stack(&caller, &request.stack, &request.name)
                    .await?;
                tracing::info!(stack_id = %snapshot.stack_id, snapshot_id = %snapshot.id, "stack snapshot saved");
                Ok(snapshot)
            },
            |snapshot| snapshot_to_proto(&snapshot),
        )
        .await
    }

    async fn list_snapshots(
        &self,
        request: Request<pb::GetStackRequest>,
    ) -> Reply<pb::ListSnapshotsResponse> {
        answer(
            request,
            |caller, request| async move {
                self.operations
                    .list_snapshots(&caller, &request.stack)
                    .await
            },
            |snapshots| pb::ListSnapshotsResponse {
                snapshots: snapshots.iter().map(snapshot_to_proto).collect(),
            },
        )
        .await
    }

    async fn get_snapshot(
        &self,
        request: Request<pb::SnapshotRequest>,
    ) -> Reply<pb::StackSnapshot> {
        answer(
            request,
            |caller, request| async move {
                self.operations
                    .show_snapshot(&caller, &request.stack, &request.snapshot_id)
                    .await
            },
            |snapshot| snapshot_to_proto(&snapshot),
        )
        .await
    }

    async fn delete_snapshot(
        &self,
        request: Request<pb::SnapshotRequest>,
    ) -> Reply<pb::DeleteSnapshotResponse> {
        answer(
            request,
            |caller, request| async move {
                self.operations
                    .delete_snapshot(&caller, &request.stack, &request.snapshot_id)
                    .await
            },
            |()| pb::DeleteSnapshotResponse {},
        )
        .await
    }

    async fn restore_snapshot(&self, request: Request<pb::SnapshotRequest>) -> Reply<pb::Stack> {
        answer(
            request,
            |caller, request| async move {
                let stack = self
                    .operations
                    .restore_snapshot(&caller, &request.stack, &request.snapshot_id)
                    .await?;
                tracing::info!(stack_id = %stack.id, snapshot_id = %request.snapshot_id, "stack restore started");
                Ok(stack)
            },
            |stack| stack_to_proto(&stack),
        )
        .await
    }

    async fn run_stack_action(&self, request: Request<pb::StackActionRequest>) -> Reply<pb::Stack> {
        answer(
            request,
            |caller, request| async move {
                let action = pb::StackActionKind::try_from(request.action).map_err(|_| {
                    Error::InvalidInput(format!("action: unknown value {}", request.action))
                })?;
                let wide_action = match action {
                    pb::StackActionKind::Unspecified => {
                        return Err(Error::InvalidInput(
                            "action: give suspend, resume, check or cancel_update".to_owned(),
                        ));
                    }
                    pb::StackActionKind::CancelUpdate => {
                        return self.operations.cancel_update(&caller, &request.stack).await;
                    }
                    pb::StackActionKind::Suspend => StackWideAction::Suspend,
                    pb::StackActionKind::Resume => StackWideAction::Resume,
                    pb::StackActionKind::Check => StackWideAction::Check,
                };
                self.operations
                    .run_stack_wide_action(&caller, &request.stack, wide_action)
                    .await
            },
            |stack| stack_to_proto(&stack),
        )
        .await
    }

    async fn get_stack_template(
        &self,
        request: Request<pb::GetStackRequest>,
    ) -> Reply<pb::StackTemplate> {
        answer(
            request,
            |caller, request| async move {
                let stack = self.operations.find_stack(&caller, &request.stack).await?;
                self.operations.definition(&stack).await
            },
            |definition| pb::StackTemplate {
                template: Some(value_to_struct(&definition.template)),
                environment: Some(value_to_struct(&definition.environment)),
                files: definition.files.into_iter().collect(),
            },
        )
        .await
    }

    async fn list_outputs(
        &self,
        request: Request<pb::GetStackRequest>,
    ) -> Reply<pb::ListOutputsResponse> {
        answer(
            request,
            |caller, request| async move {
                let stack = self.operations.find_stack(&caller, &request.stack).await?;
                self.operations.outputs(&stack).await
            },
            |outputs| pb::ListOutputsResponse {
                outputs: outputs.iter().map(output_to_proto).collect(),
            },
        )
        .await
    }

    async fn get_output(&self, request: Request<pb::GetOutputRequest>) -> Reply<pb::Output> {
        answer(
            request,
            |caller, request| async move {
                let stack = self.operations.find_stack(&caller, &request.stack).await?;
                self.operations.output(&stack, &request.output_key).await
            },
            |output| output_to_proto(&output),
        )
        .await
    }

    async fn validate_template(
        &self,
        request: Request<pb::ValidateTemplateRequest>,
    ) -> Reply<pb::ValidateTemplateResponse> {
        answer(
            request,
            |caller, request| async move {
                self.operations.validate_template(
                    &caller,
                    DefinitionInput {
                        template: &request.template,
                        environment: &request.environment,
                        environment_files: &request.environment_files,
                        files: request.files.into_iter().collect(),
                        parameters: request
                            .parameters
                            .as_ref()
                            .map(struct_to_map)
                            .unwrap_or_default(),
                    },
                    request.show_nested,
                )
            },
            |report| {
                let environment = match &report.environment {
                    serde_json::Value::Object(environment) => environment.clone(),
                    _ => serde_json::Map::new(),
                };
                pb::ValidateTemplateResponse {
                    description: report.description,
                    parameters: Some(map_to_struct(&report.parameters)),
                    parameter_groups: Some(prost_types::ListValue {
                        values: report.parameter_groups.iter().map(json_to_proto).collect(),
                    }),
                    environment: Some(map_to_struct(&environment)),
                    nested_parameters: Some(map_to_struct(&report.nested_parameters)),
                }
            },
        )
        .await
    }

    async fn list_resource_types(
        &self,
        request: Request<pb::ListResourceTypesRequest>,
    ) -> Result<Response<pb::ListResourceTypesResponse>, Status> {
        let filter = request.into_inner().name_filter;
        let resource_types = self
            .operations
            .registry()
            .names()
            .filter(|name| name.contains(&filter))
            .cloned()
            .collect();
        Ok(Response::new(pb::ListResourceTypesResponse {
            resource_types,
        }))
    }

    async fn get_resource_type_schema(
        &self,
        request: Request<pb::GetResourceTypeSchemaRequest>,
    ) -> Result<Response<pb::ResourceTypeSchema>, Status> {
        let schema = self
            .operations
            .resource_type_schema(&request.get_ref().resource_type)?;
        let properties = schema
            .properties
            .iter()
            .map(|property| (property.name.to_owned(), property.to_heat_json()))
            .collect();
        let attributes = schema
            .attributes
            .iter()
            .map(|attribute| {
                (
                    attribute.name.to_owned(),
                    serde_json::json!({ "description": attribute.description, "type": "string" }),
                )
            })
            .collect::<serde_json::Map<String, Value>>();
        Ok(Response::new(pb::ResourceTypeSchema {
            resource_type: schema.type_name.to_owned(),
            properties: Some(map_to_struct(&properties)),
            attributes: Some(map_to_struct(&attributes)),
            description: schema.description.to_owned(),
            template_resource_name: crate::resources::template_resource_name(schema.type_name)
                .to_owned(),
        }))
    }

    async fn preview_stack_update(
        &self,
        request: Request<pb::UpdateStackRequest>,
    ) -> Reply<pb::StackUpdatePreview> {
        answer(
            request,
            |caller, request| async move {
                self.operations
                    .preview_update(&caller, &update_of(request))
                    .await
            },
            |(stack, preview)| {
                let view = |rows: &[crate::domain::Resource]| -> Vec<pb::Resource> {
                    rows.iter()
                        .map(|row| {
                            super::convert::resource_to_proto(row, &stack.name, Vec::new(), false)
                        })
                        .collect()
                };
                pb::StackUpdatePreview {
                    added: view(&preview.added),
                    deleted: view(&preview.deleted),
                    replaced: view(&preview.replaced),
                    updated: view(&preview.updated),
                    unchanged: view(&preview.unchanged),
                }
            },
        )
        .await
    }

    async fn list_template_versions(
        &self,
        _request: Request<pb::ListTemplateVersionsRequest>,
    ) -> Result<Response<pb::ListTemplateVersionsResponse>, Status> {
        let template_versions = crate::domain::template::CFN_VERSIONS
            .iter()
            .map(|version| pb::TemplateVersionInfo {
                version: (*version).to_owned(),
                r#type: "cfn".to_owned(),
                aliases: Vec::new(),
            })
            .chain(TemplateVersion::ALL.iter().map(|version| {
                pb::TemplateVersionInfo {
                    version: format!("{HOT_VERSION_KEY}.{}", version.date()),
                    r#type: "hot".to_owned(),
                    aliases: version
                        .release_name()
                        .map(|name| format!("{HOT_VERSION_KEY}.{name}"))
                        .into_iter()
                        .collect(),
                }
            }))
            .collect();
        Ok(Response::new(pb::ListTemplateVersionsResponse {
            template_versions,
        }))
    }

    async fn list_template_functions(
        &self,
        request: Request<pb::ListTemplateFunctionsRequest>,
    ) -> Result<Response<pb::ListTemplateFunctionsResponse>, Status> {
        let request = request.into_inner();
        if crate::domain::template::CFN_VERSIONS.contains(&request.template_version.as_str()) {
            let functions =
                crate::domain::template::cfn_functions(request.with_condition_functions)
                    .into_iter()
                    .map(|(function, description)| pb::TemplateFunction {
                        function: function.to_owned(),
                        description: description.to_owned(),
                    })
                    .collect();
            return Ok(Response::new(pb::ListTemplateFunctionsResponse {
                functions,
            }));
        }
        let version = request
            .template_version
            .strip_prefix(HOT_VERSION_KEY)
            .and_then(|rest| rest.strip_prefix('.'))
            .and_then(TemplateVersion::parse)
            .ok_or_else(|| {
                Error::NotFound(format!(
                    "Template with version {} not found",
                    ember_runtime::quote::quoted(&request.template_version)
                ))
            })?;
        let functions = template_functions(version, request.with_condition_functions)
            .into_iter()
            .map(|(function, description)| pb::TemplateFunction {
                function: function.to_owned(),
                description: description.to_owned(),
            })
            .collect();
        Ok(Response::new(pb::ListTemplateFunctionsResponse {
            functions,
        }))
    }
}

/// A stack's preview, its nested stacks' within it.
fn preview_to_proto(
    stack: &crate::domain::Stack,
    preview: &crate::stacks::Preview,
) -> pb::StackPreview {
    let parsed = &preview.parsed;
    let resources = preview
        .resources
        .iter()
        .map(|resource| {
            let required_by = parsed
                .graph
                .dependents_of(&resource.name)
                .into_iter()
                .collect();
            super::convert::resource_to_proto(resource, &preview.stack_name, required_by, true)
        })
        .collect();
    let shown = pb::Stack {
        name: preview.stack_name.clone(),
        parameters: Some(map_to_struct(&parsed.parameters.display_values())),
        template_description: parsed.template.description.clone().unwrap_or_default(),
        ..stack_to_proto(stack)
    };
    pb::StackPreview {
        stack: Some(shown),
        resources,
        nested: preview
            .nested
            .iter()
            .map(|(name, nested)| (name.clone(), preview_to_proto(stack, nested)))
            .collect(),
    }
}

/// The update a request asks for.
fn update_of(request: pb::UpdateStackRequest) -> UpdateStack {
    UpdateStack {
        name_or_id: request.stack,
        template: request.template,
        environment: request.environment,
        environment_files: request.environment_files,
        files: request.files.into_iter().collect(),
        parameters: request
            .parameters
            .as_ref()
            .map(struct_to_map)
            .unwrap_or_default(),
        timeout_mins: (request.timeout_mins > 0).then_some(request.timeout_mins),
        disable_rollback: request.disable_rollback,
        existing: request.existing,
        clear_parameters: request.clear_parameters,
        tags: (!request.tags.is_empty()).then_some(request.tags),
        generated_template: None,
    }
}

/// How Heat names HOT versions in its template-version API.
const HOT_VERSION_KEY: &str = "heat_template_version";

fn snapshot_to_proto(snapshot: &crate::domain::StackSnapshot) -> pb::StackSnapshot {
    pb::StackSnapshot {
        id: snapshot.id.to_string(),
        stack_id: snapshot.stack_id.to_string(),
        name: snapshot.name.clone(),
        status: snapshot.status.clone(),
        status_reason: snapshot.status_reason.clone(),
        data: Some(value_to_struct(&snapshot.data)),
        created_at: Some(ember_runtime::time::to_timestamp(snapshot.created_at)),
    }
}
