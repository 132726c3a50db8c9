//! `StackService`: thin handlers over [`StackOperations`].

use std::sync::Arc;

use ember_proto::engine::v1 as pb;
use ember_runtime::Identity;
use ember_runtime::ids::parse_optional_uuid;
use serde_json::Value;
use tonic::{Request, Response, Status};

use super::convert::{
    json_to_proto, map_to_struct, stack_into_proto, stack_to_proto, struct_to_map, value_to_struct,
};
use crate::domain::LockLevel;
use crate::domain::template::{TemplateVersion, template_functions};
use crate::error::Error;
use crate::stacks::{
    CreateStack, DefinitionInput, OutputValue, StackDetails, StackOperation, StackOperations,
    StackWideAction, UpdateStack,
};
use crate::store::StackListQuery;

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
    async fn create_stack(
        &self,
        request: Request<pb::CreateStackRequest>,
    ) -> Result<Response<pb::Stack>, Status> {
        let identity = Identity::of(&request)?.clone();
        let subject_token = ember_runtime::identity::SubjectToken::of(&request).cloned();
        let request = request.into_inner();
        let stack = self
            .operations
            .create_stack_delegating(&identity, subject_token.as_ref(), create_request(request))
            .await?;
        tracing::info!(stack_id = %stack.id, stack = %stack.name, "stack create started");
        Ok(Response::new(stack_to_proto(&stack)))
    }

    async fn preview_stack(
        &self,
        request: Request<pb::CreateStackRequest>,
    ) -> Result<Response<pb::StackPreview>, Status> {
        let identity = Identity::of(&request)?.clone();
        let (stack, preview) = self
            .operations
            .preview_stack(&identity, &create_request(request.into_inner()))?;
        Ok(Response::new(preview_to_proto(&stack, &preview)))
    }

    async fn get_stack(
        &self,
        request: Request<pb::GetStackRequest>,
    ) -> Result<Response<pb::Stack>, Status> {
        let identity = Identity::of(&request)?.clone();
        let stack = self
            .operations
            .find_stack(&identity, &request.get_ref().stack)
            .await?;
        let details = self.operations.stack_details(stack).await?;
        Ok(Response::new(details_to_proto(&details)))
    }

    async fn lock_stack(
        &self,
        request: Request<pb::LockStackRequest>,
    ) -> Result<Response<pb::Stack>, Status> {
        let identity = Identity::of(&request)?.clone();
        let request = request.into_inner();
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
            .lock_stack_until(&identity, &request.stack, level, reason, expires_at)
            .await?;
        tracing::info!(stack_id = %stack.id, level = level.as_str(), "stack lock started");
        Ok(Response::new(stack_to_proto(&stack)))
    }

    async fn unlock_stack(
        &self,
        request: Request<pb::GetStackRequest>,
    ) -> Result<Response<pb::Stack>, Status> {
        let identity = Identity::of(&request)?.clone();
        let stack = self
            .operations
            .unlock_stack(&identity, &request.get_ref().stack)
            .await?;
        tracing::info!(stack_id = %stack.id, "stack unlock started");
        Ok(Response::new(stack_to_proto(&stack)))
    }

    async fn check_operation(
        &self,
        request: Request<pb::CheckOperationRequest>,
    ) -> Result<Response<pb::CheckOperationResponse>, Status> {
        let identity = Identity::of(&request)?.clone();
        let request = request.into_inner();
        let operation = StackOperation::parse(&request.operation).ok_or_else(|| {
            Error::InvalidInput(format!(
                "operation {:?} is not one of update, delete, abandon, suspend, resume, check, cancel_update, signal, mark_unhealthy, lock, unlock",
                request.operation
            ))
        })?;
        let check = self
            .operations
            .check_operation(&identity, &request.stack, operation)
            .await?;
        let (allowed, reason, blockers) = super::convert::dry_run_verdict(&check.blockers);
        Ok(Response::new(pb::CheckOperationResponse {
            allowed,
            reason,
            blockers,
            break_glass_would_pass: check.break_glass_would_pass,
            stack_lock: check
                .lock
                .as_ref()
                .map(super::convert::maintenance_lock_to_proto),
        }))
    }

    async fn identify_stack(
        &self,
        request: Request<pb::GetStackRequest>,
    ) -> Result<Response<pb::Stack>, Status> {
        let identity = Identity::of(&request)?.clone();
        let stack = self
            .operations
            .find_stack(&identity, &request.get_ref().stack)
            .await?;
        Ok(Response::new(stack_to_proto(&stack)))
    }

    async fn list_stacks(
        &self,
        request: Request<pb::ListStacksRequest>,
    ) -> Result<Response<pb::ListStacksResponse>, Status> {
        let identity = Identity::of(&request)?.clone();
        let request = request.into_inner();
        let marker = parse_optional_uuid("marker", &request.marker)?;
        let query = StackListQuery {
            limit: request.limit,
            marker,
            name: (!request.name.is_empty()).then_some(request.name),
            show_nested: request.show_nested,
            locked: request.locked,
        };
        let stacks = self.operations.list_stacks(&identity, &query).await?;
        let next_marker = if stacks.len() == query.page_size() as usize {
            stacks
                .last()
                .map(|stack| stack.id.to_string())
                .unwrap_or_default()
        } else {
            String::new()
        };
        Ok(Response::new(pb::ListStacksResponse {
            stacks: stacks.into_iter().map(stack_into_proto).collect(),
            next_marker,
        }))
    }

    async fn update_stack(
        &self,
        request: Request<pb::UpdateStackRequest>,
    ) -> Result<Response<pb::Stack>, Status> {
        let identity = Identity::of(&request)?.clone();
        let update = update_of(request.into_inner());
        let stack = self.operations.update_stack(&identity, update).await?;
        tracing::info!(stack_id = %stack.id, stack = %stack.name, "stack update started");
        Ok(Response::new(stack_to_proto(&stack)))
    }

    async fn delete_stack(
        &self,
        request: Request<pb::GetStackRequest>,
    ) -> Result<Response<pb::Stack>, Status> {
        let identity = Identity::of(&request)?.clone();
        let stack = self
            .operations
            .delete_stack(&identity, &request.get_ref().stack)
            .await?;
        tracing::info!(stack_id = %stack.id, stack = %stack.name, "stack delete started");
        Ok(Response::new(stack_to_proto(&stack)))
    }

    async fn abandon_stack(
        &self,
        request: Request<pb::GetStackRequest>,
    ) -> Result<Response<pb::AbandonStackResponse>, Status> {
        let identity = Identity::of(&request)?.clone();
        let data = self
            .operations
            .abandon_stack(&identity, &request.get_ref().stack)
            .await?;
        Ok(Response::new(pb::AbandonStackResponse {
            data: Some(value_to_struct(&data)),
        }))
    }

    async fn export_stack(
        &self,
        request: Request<pb::GetStackRequest>,
    ) -> Result<Response<pb::AbandonStackResponse>, Status> {
        let identity = Identity::of(&request)?.clone();
        let data = self
            .operations
            .export_stack(&identity, &request.get_ref().stack)
            .await?;
        Ok(Response::new(pb::AbandonStackResponse {
            data: Some(value_to_struct(&data)),
        }))
    }

    async fn create_snapshot(
        &self,
        request: Request<pb::CreateSnapshotRequest>,
    ) -> Result<Response<pb::StackSnapshot>, Status> {
        let identity = Identity::of(&request)?.clone();
        let request = request.into_inner();
        let snapshot = self
            .operations
            .snapshot_stack(&identity, &request.stack, &request.name)
            .await?;
        tracing::info!(stack_id = %snapshot.stack_id, snapshot_id = %snapshot.id, "stack snapshot saved");
        Ok(Response::new(snapshot_to_proto(&snapshot)))
    }

    async fn list_snapshots(
        &self,
        request: Request<pb::GetStackRequest>,
    ) -> Result<Response<pb::ListSnapshotsResponse>, Status> {
        let identity = Identity::of(&request)?.clone();
        let snapshots = self
            .operations
            .list_snapshots(&identity, &request.get_ref().stack)
            .await?;
        Ok(Response::new(pb::ListSnapshotsResponse {
            snapshots: snapshots.iter().map(snapshot_to_proto).collect(),
        }))
    }

    async fn get_snapshot(
        &self,
        request: Request<pb::SnapshotRequest>,
    ) -> Result<Response<pb::StackSnapshot>, Status> {
        let identity = Identity::of(&request)?.clone();
        let request = request.into_inner();
        let snapshot = self
            .operations
            .show_snapshot(&identity, &request.stack, &request.snapshot_id)
            .await?;
        Ok(Response::new(snapshot_to_proto(&snapshot)))
    }

    async fn delete_snapshot(
        &self,
        request: Request<pb::SnapshotRequest>,
    ) -> Result<Response<pb::DeleteSnapshotResponse>, Status> {
        let identity = Identity::of(&request)?.clone();
        let request = request.into_inner();
        self.operations
            .delete_snapshot(&identity, &request.stack, &request.snapshot_id)
            .await?;
        Ok(Response::new(pb::DeleteSnapshotResponse {}))
    }

    async fn restore_snapshot(
        &self,
        request: Request<pb::SnapshotRequest>,
    ) -> Result<Response<pb::Stack>, Status> {
        let identity = Identity::of(&request)?.clone();
        let request = request.into_inner();
        let stack = self
            .operations
            .restore_snapshot(&identity, &request.stack, &request.snapshot_id)
            .await?;
        tracing::info!(stack_id = %stack.id, snapshot_id = %request.snapshot_id, "stack restore started");
        Ok(Response::new(stack_to_proto(&stack)))
    }

    async fn run_stack_action(
        &self,
        request: Request<pb::StackActionRequest>,
    ) -> Result<Response<pb::Stack>, Status> {
        let identity = Identity::of(&request)?.clone();
        let request = request.into_inner();
        let action = pb::StackActionKind::try_from(request.action).map_err(|_| {
            Error::InvalidInput(format!("action: unknown value {}", request.action))
        })?;
        let wide_action = match action {
            pb::StackActionKind::Unspecified => {
                return Err(Error::InvalidInput(
                    "action: give suspend, resume, check or cancel_update".to_owned(),
                )
                .into());
            }
            pb::StackActionKind::CancelUpdate => {
                let stack = self
                    .operations
                    .cancel_update(&identity, &request.stack)
                    .await?;
                return Ok(Response::new(stack_to_proto(&stack)));
            }
            pb::StackActionKind::Suspend => StackWideAction::Suspend,
            pb::StackActionKind::Resume => StackWideAction::Resume,
            pb::StackActionKind::Check => StackWideAction::Check,
        };
        let stack = self
            .operations
            .run_stack_wide_action(&identity, &request.stack, wide_action)
            .await?;
        Ok(Response::new(stack_to_proto(&stack)))
    }

    async fn get_stack_template(
        &self,
        request: Request<pb::GetStackRequest>,
    ) -> Result<Response<pb::StackTemplate>, Status> {
        let identity = Identity::of(&request)?.clone();
        let stack = self
            .operations
            .find_stack(&identity, &request.get_ref().stack)
            .await?;
        let definition = self.operations.definition(&stack).await?;
        Ok(Response::new(pb::StackTemplate {
            template: Some(value_to_struct(&definition.template)),
            environment: Some(value_to_struct(&definition.environment)),
            files: definition.files.into_iter().collect(),
        }))
    }

    async fn list_outputs(
        &self,
        request: Request<pb::GetStackRequest>,
    ) -> Result<Response<pb::ListOutputsResponse>, Status> {
        let identity = Identity::of(&request)?.clone();
        let stack = self
            .operations
            .find_stack(&identity, &request.get_ref().stack)
            .await?;
        let outputs = self.operations.outputs(&stack).await?;
        Ok(Response::new(pb::ListOutputsResponse {
            outputs: outputs.iter().map(output_to_proto).collect(),
        }))
    }

    async fn get_output(
        &self,
        request: Request<pb::GetOutputRequest>,
    ) -> Result<Response<pb::Output>, Status> {
        let identity = Identity::of(&request)?.clone();
        let request = request.into_inner();
        let stack = self
            .operations
            .find_stack(&identity, &request.stack)
            .await?;
        let output = self.operations.output(&stack, &request.output_key).await?;
        Ok(Response::new(output_to_proto(&output)))
    }

    async fn validate_template(
        &self,
        request: Request<pb::ValidateTemplateRequest>,
    ) -> Result<Response<pb::ValidateTemplateResponse>, Status> {
        let identity = Identity::of(&request)?.clone();
        let request = request.into_inner();
        let report = self.operations.validate_template(
            &identity,
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
        )?;
        let environment = match &report.environment {
            serde_json::Value::Object(environment) => environment.clone(),
            _ => serde_json::Map::new(),
        };
        Ok(Response::new(pb::ValidateTemplateResponse {
            description: report.description,
            parameters: Some(map_to_struct(&report.parameters)),
            parameter_groups: Some(prost_types::ListValue {
                values: report.parameter_groups.iter().map(json_to_proto).collect(),
            }),
            environment: Some(map_to_struct(&environment)),
            nested_parameters: Some(map_to_struct(&report.nested_parameters)),
        }))
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
    ) -> Result<Response<pb::StackUpdatePreview>, Status> {
        let identity = Identity::of(&request)?.clone();
        let update = update_of(request.into_inner());
        let (stack, preview) = self.operations.preview_update(&identity, &update).await?;
        let view = |rows: &[crate::domain::Resource]| -> Vec<pb::Resource> {
            rows.iter()
                .map(|row| super::convert::resource_to_proto(row, &stack.name, Vec::new(), false))
                .collect()
        };
        Ok(Response::new(pb::StackUpdatePreview {
            added: view(&preview.added),
            deleted: view(&preview.deleted),
            replaced: view(&preview.replaced),
            updated: view(&preview.updated),
            unchanged: view(&preview.unchanged),
        }))
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
