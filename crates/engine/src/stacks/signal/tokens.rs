//! Signals that come with a token instead of a user's credentials (a wait
//! condition handle's and a software deployment's signal URLs): the token
//! compared in constant time, then the signal recorded.

use serde_json::Value;

use super::SignalOutcome;
use crate::domain::Stack;
use crate::error::{Error, Result};
use crate::resources::software::is_deployment;
use crate::resources::wait_condition::{handle_style, signal_token};
use crate::stacks::StackOperations;
use crate::stacks::mark_unhealthy::find_resource;

impl StackOperations {
    /// Signals a wait condition handle with its secret instead of a user's
    /// token: `project_id` (when the URL names one) must be the stack's,
    /// `stack_id` is the stack's id, `handle` the handle's name or id.
    /// A wrong secret is answered as an unknown handle.
    pub async fn signal_wait_handle_with_token(
        &self,
        project_id: Option<&str>,
        stack_id: &str,
        handle: &str,
        token: &str,
        details: Value,
    ) -> Result<SignalOutcome> {
        let not_found = || {
            Error::NotFound(format!(
                "no wait condition handle {:?} of stack {:?} takes signals with this token",
                ember_runtime::quote::quoted(handle),
                ember_runtime::quote::quoted(stack_id)
            ))
        };
        let stack_uuid = uuid::Uuid::parse_str(stack_id).map_err(|_| not_found())?;
        let stack = self
            .store()
            .get_stack(stack_uuid)
            .await?
            .filter(|stack| project_id.is_none_or(|project| stack.project_id == project))
            .ok_or_else(not_found)?;
        let resource = match find_resource(
            &stack.name,
            self.store().list_resources(stack.id).await?,
            handle,
        ) {
            Ok(resource) => resource,
            // A deployment being created has no physical id yet: its
            // signal URL names the deployment, whose derived config holds
            // the secret.
            Err(_) => {
                return self
                    .signal_deployment_with_token(&stack, handle, token, &details)
                    .await
                    .map_err(|error| match error {
                        Error::NotFound(_) => not_found(),
                        other => other,
                    });
            }
        };
        let style = handle_style(&resource.type_name);
        if style.is_none() && !is_deployment(&resource.type_name) {
            return Err(not_found());
        }
        let expected = signal_token(&resource).ok_or_else(not_found)?;
        if !ember_runtime::identity::constant_time_eq(expected.as_bytes(), token.as_bytes()) {
            return Err(not_found());
        }
        match style {
            Some(style) => self.signal_wait_handle(&resource, style, &details).await,
            None => {
                self.signal_deployment(&resource, Some(&stack.project_id), &details)
                    .await
            }
        }
    }

    /// A signal to deployment `deployment` of `stack` with its secret (the
    /// token of the signal URL in its derived config).
    pub(super) async fn signal_deployment_with_token(
        &self,
        stack: &Stack,
        deployment: &str,
        token: &str,
        details: &Value,
    ) -> Result<SignalOutcome> {
        let unknown = || Error::NotFound("no such deployment".to_owned());
        let deployment_id = uuid::Uuid::parse_str(deployment).map_err(|_| unknown())?;
        let software =
            self.engine.registry.software().ok_or_else(|| {
                Error::Unavailable("software deployments are not enabled".to_owned())
            })?;
        let record = software
            .store()
            .get_deployment(Some(&stack.project_id), deployment_id)
            .await?
            .ok_or_else(unknown)?;
        let config = software
            .store()
            .get_config(Some(&stack.project_id), record.config_id)
            .await?
            .ok_or_else(unknown)?;
        let input = |name: &str| {
            config
                .inputs
                .iter()
                .find(|input| input.get("name").and_then(Value::as_str) == Some(name))
                .and_then(|input| input.get("value"))
                .and_then(Value::as_str)
                .map(str::to_owned)
        };
        let expected = input("deploy_signal_id")
            .and_then(|url| url.split_once("token=").map(|(_, token)| token.to_owned()))
            .ok_or_else(unknown)?;
        let stack_matches =
            input("deploy_stack_id").is_some_and(|path| path.ends_with(&format!("/{}", stack.id)));
        if !stack_matches
            || !ember_runtime::identity::constant_time_eq(expected.as_bytes(), token.as_bytes())
        {
            return Err(unknown());
        }
        let message = software
            .signal_deployment(Some(&stack.project_id), deployment_id, details)
            .await?;
        if let Some(name) = input("deploy_resource_name")
            && let Ok(resource) = find_resource(
                &stack.name,
                self.store().list_resources(stack.id).await?,
                &name,
            )
        {
            self.resource_event(&resource, &message).await;
        }
        Ok(SignalOutcome {
            scaling: None,
            message,
        })
    }
}
