//! `StackService`: stacks of the caller's project.

use std::sync::Arc;

use ember_proto::engine::v1 as pb;
use ember_runtime::Identity;
use ember_runtime::time::to_timestamp;
use tonic::{Request, Response, Status};
use uuid::Uuid;

use crate::domain::{ActionStatus, Stack, StackAction};
use crate::error::Error;
use crate::store::{StackListQuery, StackStore};

pub struct StackHandler {
    stacks: Arc<dyn StackStore>,
}

impl StackHandler {
    pub fn new(stacks: Arc<dyn StackStore>) -> Self {
        StackHandler { stacks }
    }
}

#[tonic::async_trait]
impl pb::stack_service_server::StackService for StackHandler {
    async fn get_stack(
        &self,
        request: Request<pb::GetStackRequest>,
    ) -> Result<Response<pb::Stack>, Status> {
        let project_id = Identity::of(&request)?.project_id.clone();
        let name_or_id = request.into_inner().stack;
        if name_or_id.is_empty() {
            return Err(Error::InvalidInput("stack: give a stack name or id".to_owned()).into());
        }
        let stack = self
            .stacks
            .find_stack(&project_id, &name_or_id)
            .await?
            .ok_or_else(|| Error::NotFound(format!("stack {name_or_id:?} not found")))?;
        Ok(Response::new(stack_to_proto(&stack)))
    }

    async fn create_stack(
        &self,
        _request: Request<pb::CreateStackRequest>,
    ) -> Result<Response<pb::Stack>, Status> {
        Err(not_yet("create_stack"))
    }

    async fn preview_stack(
        &self,
        _request: Request<pb::CreateStackRequest>,
    ) -> Result<Response<pb::StackPreview>, Status> {
        Err(not_yet("preview_stack"))
    }

    async fn update_stack(
        &self,
        _request: Request<pb::UpdateStackRequest>,
    ) -> Result<Response<pb::Stack>, Status> {
        Err(not_yet("update_stack"))
    }

    async fn delete_stack(
        &self,
        _request: Request<pb::GetStackRequest>,
    ) -> Result<Response<pb::Stack>, Status> {
        Err(not_yet("delete_stack"))
    }

    async fn abandon_stack(
        &self,
        _request: Request<pb::GetStackRequest>,
    ) -> Result<Response<pb::AbandonStackResponse>, Status> {
        Err(not_yet("abandon_stack"))
    }

    async fn run_stack_action(
        &self,
        _request: Request<pb::StackActionRequest>,
    ) -> Result<Response<pb::Stack>, Status> {
        Err(not_yet("run_stack_action"))
    }

    async fn get_stack_template(
        &self,
        _request: Request<pb::GetStackRequest>,
    ) -> Result<Response<pb::StackTemplate>, Status> {
        Err(not_yet("get_stack_template"))
    }

    async fn list_outputs(
        &self,
        _request: Request<pb::GetStackRequest>,
    ) -> Result<Response<pb::ListOutputsResponse>, Status> {
        Err(not_yet("list_outputs"))
    }

    async fn get_output(
        &self,
        _request: Request<pb::GetOutputRequest>,
    ) -> Result<Response<pb::Output>, Status> {
        Err(not_yet("get_output"))
    }

    async fn validate_template(
        &self,
        _request: Request<pb::ValidateTemplateRequest>,
    ) -> Result<Response<pb::ValidateTemplateResponse>, Status> {
        Err(not_yet("validate_template"))
    }

    async fn list_resource_types(
        &self,
        _request: Request<pb::ListResourceTypesRequest>,
    ) -> Result<Response<pb::ListResourceTypesResponse>, Status> {
        Err(not_yet("list_resource_types"))
    }

    async fn get_resource_type_schema(
        &self,
        _request: Request<pb::GetResourceTypeSchemaRequest>,
    ) -> Result<Response<pb::ResourceTypeSchema>, Status> {
        Err(not_yet("get_resource_type_schema"))
    }

    async fn list_stacks(
        &self,
        request: Request<pb::ListStacksRequest>,
    ) -> Result<Response<pb::ListStacksResponse>, Status> {
        let project_id = Identity::of(&request)?.project_id.clone();
        let request = request.into_inner();
        let marker = match request.marker.as_str() {
            "" => None,
            marker => Some(Uuid::parse_str(marker).map_err(|_| {
                Error::InvalidInput(format!("marker {marker:?} is not a stack id"))
            })?),
        };
        let query = StackListQuery {
            limit: request.limit,
            marker,
            name: (!request.name.is_empty()).then_some(request.name),
            show_nested: request.show_nested,
        };
        let stacks = self.stacks.list_stacks(&project_id, &query).await?;
        let next_marker = if stacks.len() == query.page_size() as usize {
            stacks
                .last()
                .map(|stack| stack.id.to_string())
                .unwrap_or_default()
        } else {
            String::new()
        };
        Ok(Response::new(pb::ListStacksResponse {
            stacks: stacks.iter().map(stack_to_proto).collect(),
            next_marker,
        }))
    }
}

pub fn stack_to_proto(stack: &Stack) -> pb::Stack {
    pb::Stack {
        id: stack.id.to_string(),
        name: stack.name.clone(),
        project_id: stack.project_id.clone(),
        user_id: stack.user_id.clone(),
        action: action_to_proto(stack.action) as i32,
        status: status_to_proto(stack.status) as i32,
        stack_status: stack.stack_status(),
        status_reason: stack.status_reason.clone(),
        description: stack.description.clone(),
        parent_id: stack.parent_id.map(|id| id.to_string()).unwrap_or_default(),
        tags: stack.tags.clone(),
        timeout_mins: stack.timeout_mins.unwrap_or(0),
        disable_rollback: stack.disable_rollback,
        created_at: Some(to_timestamp(stack.created_at)),
        updated_at: Some(to_timestamp(stack.updated_at)),
        parameters: None,
        outputs: Vec::new(),
        template_description: String::new(),
        nested_depth: stack.nested_depth,
        parent_resource: stack.parent_resource.clone().unwrap_or_default(),
    }
}

fn action_to_proto(action: StackAction) -> pb::StackAction {
    match action {
        StackAction::Init => pb::StackAction::Init,
        StackAction::Create => pb::StackAction::Create,
        StackAction::Update => pb::StackAction::Update,
        StackAction::Delete => pb::StackAction::Delete,
        StackAction::Rollback => pb::StackAction::Rollback,
        StackAction::Suspend => pb::StackAction::Suspend,
        StackAction::Resume => pb::StackAction::Resume,
        StackAction::Check => pb::StackAction::Check,
        StackAction::Adopt => pb::StackAction::Adopt,
        StackAction::Abandon => pb::StackAction::Abandon,
        StackAction::Lock => pb::StackAction::Lock,
        StackAction::Unlock => pb::StackAction::Unlock,
    }
}

fn status_to_proto(status: ActionStatus) -> pb::ActionStatus {
    match status {
        ActionStatus::InProgress => pb::ActionStatus::InProgress,
        ActionStatus::Complete => pb::ActionStatus::Complete,
        ActionStatus::Failed => pb::ActionStatus::Failed,
    }
}

/// Transitional: the engine's stack operations land RPC by RPC.
fn not_yet(rpc: &str) -> Status {
    Status::unimplemented(format!("{rpc} is being implemented in the engine"))
}
