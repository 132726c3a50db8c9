//! The handle resource types: a secret made with the handle, signals
//! sent with it by token, temp URL or CloudFormation URL.

use std::sync::Arc;

use async_trait::async_trait;
use serde_json::{Map, Value, json};

use super::{
    CFN_HANDLE_TYPE, HEAT_HANDLE_TYPE, UPDATE_HANDLE_TYPE, WaitConditions, new_signal_token,
};
use crate::domain::Resource;
use crate::domain::wait_condition::HandleStyle;
use crate::resources::{
    AttributeSchema, PropertySchema, PropertyType, ResourceFailure, ResourceOutcome,
    ResourceRequest, ResourceType, ResourceTypeSchema,
};

/// How a Heat handle's signals are sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Transport {
    Token,
    TempUrl,
    Cfn,
    Heat,
    None,
}

impl Transport {
    fn parse(text: &str) -> Result<Transport, ResourceFailure> {
        match text {
            "TOKEN_SIGNAL" => Ok(Transport::Token),
            "TEMP_URL_SIGNAL" => Ok(Transport::TempUrl),
            "CFN_SIGNAL" => Ok(Transport::Cfn),
            "HEAT_SIGNAL" => Ok(Transport::Heat),
            "NO_SIGNAL" => Ok(Transport::None),
            "ZAQAR_SIGNAL" => Err(ResourceFailure::new(
                "signal_transport ZAQAR_SIGNAL is not supported by Ember: use TOKEN_SIGNAL or TEMP_URL_SIGNAL".to_owned(),
            )),
            other => Err(ResourceFailure::new(format!(
                "signal_transport {other:?} is not one of TOKEN_SIGNAL, TEMP_URL_SIGNAL, CFN_SIGNAL, HEAT_SIGNAL, NO_SIGNAL"
            ))),
        }
    }
}

/// A wait condition handle, Heat's or CloudFormation's.
pub struct WaitConditionHandle {
    schema: ResourceTypeSchema,
    style: HandleStyle,
    /// `OS::Heat::UpdateWaitConditionHandle`: a new handle (and no signals)
    /// on every stack update.
    replaced_on_update: bool,
    conditions: Arc<WaitConditions>,
}

impl WaitConditionHandle {
    pub fn heat(conditions: Arc<WaitConditions>) -> Self {
        WaitConditionHandle {
            schema: ResourceTypeSchema {
                type_name: HEAT_HANDLE_TYPE,
                description: "Receives the signals a wait condition waits for: give it to what signals (a server's boot script) and send SUCCESS or FAILURE to it.",
                properties: vec![
                    PropertySchema::new(
                        "signal_transport",
                        PropertyType::String,
                        "How the client will signal the wait condition. TOKEN_SIGNAL: an HTTP POST to the handle's endpoint with its token as X-Auth-Token (see curl_cli). TEMP_URL_SIGNAL and CFN_SIGNAL: an HTTP POST or PUT to the URL in the signal attribute. HEAT_SIGNAL: the endpoint and token in the signal attribute. NO_SIGNAL: nothing can signal it.",
                    )
                    .default(json!("TOKEN_SIGNAL"))
                    .allowed_values(
                        [
                            "CFN_SIGNAL",
                            "TEMP_URL_SIGNAL",
                            "HEAT_SIGNAL",
                            "NO_SIGNAL",
                            "ZAQAR_SIGNAL",
                            "TOKEN_SIGNAL",
                        ]
                        .into_iter()
                        .map(|transport| json!(transport))
                        .collect(),
                    ),
                ],
                attributes: vec![
                    AttributeSchema {
                        name: "token",
                        description: "The token that signals the handle with TOKEN_SIGNAL (as X-Auth-Token); null for other transports.",
                    },
                    AttributeSchema {
                        name: "endpoint",
                        description: "The URL that takes the handle's signals with TOKEN_SIGNAL; null for other transports.",
                    },
                    AttributeSchema {
                        name: "curl_cli",
                        description: "A curl command that signals the handle with TOKEN_SIGNAL: add --data-binary '{\"status\": \"SUCCESS\"}' (or FAILURE); null for other transports.",
                    },
                    AttributeSchema {
                        name: "signal",
                        description: "JSON of what a client needs to signal the handle with the chosen transport.",
                    },
                ],
                accepts_any_properties: false,
                accepts_any_attributes: false,
            },
            style: HandleStyle::Heat,
            replaced_on_update: false,
            conditions,
        }
    }

    fn cloudformation(
        type_name: &'static str,
        replaced_on_update: bool,
        conditions: Arc<WaitConditions>,
    ) -> Self {
        WaitConditionHandle {
            schema: ResourceTypeSchema {
                type_name,
                description: "Receives the signals a wait condition waits for; its reference is the URL that takes them (an HTTP POST or PUT of {\"Status\", \"Reason\", \"UniqueId\", \"Data\"}).",
                properties: Vec::new(),
                attributes: Vec::new(),
                accepts_any_properties: false,
                accepts_any_attributes: false,
            },
            style: HandleStyle::CloudFormation,
            replaced_on_update,
            conditions,
        }
    }

    pub fn aws(conditions: Arc<WaitConditions>) -> Self {
        WaitConditionHandle::cloudformation(CFN_HANDLE_TYPE, false, conditions)
    }

    pub fn replaced_on_every_update(conditions: Arc<WaitConditions>) -> Self {
        WaitConditionHandle::cloudformation(UPDATE_HANDLE_TYPE, true, conditions)
    }
}

#[async_trait]
impl ResourceType for WaitConditionHandle {
    fn schema(&self) -> &ResourceTypeSchema {
        &self.schema
    }

    async fn create(&self, request: &ResourceRequest) -> Result<ResourceOutcome, ResourceFailure> {
        let handle_id = uuid::Uuid::new_v4().to_string();
        let token = new_signal_token();
        let token_url = self
            .conditions
            .token_url(request.stack_id, &handle_id, &token);
        let mut attributes = Map::new();
        if self.style == HandleStyle::Heat {
            let transport = Transport::parse(
                request
                    .properties
                    .get("signal_transport")
                    .and_then(Value::as_str)
                    .unwrap_or("TOKEN_SIGNAL"),
            )?;
            let endpoint = self.conditions.resource_signal_url(request);
            let (token_attribute, endpoint_attribute, curl, signal) = match transport {
                Transport::Token => (
                    json!(token),
                    json!(endpoint),
                    json!(format!(
                        "curl -i -X POST -H 'X-Auth-Token: {token}' -H 'Content-Type: application/json' -H 'Accept: application/json' {endpoint}"
                    )),
                    Value::Null,
                ),
                Transport::TempUrl | Transport::Cfn => (
                    Value::Null,
                    Value::Null,
                    Value::Null,
                    json!({ "alarm_url": token_url }),
                ),
                Transport::Heat => (
                    Value::Null,
                    Value::Null,
                    Value::Null,
                    json!({ "alarm_url": endpoint, "token": token }),
                ),
                Transport::None => (Value::Null, Value::Null, Value::Null, json!({})),
            };
            attributes.insert("token".to_owned(), token_attribute);
            attributes.insert("endpoint".to_owned(), endpoint_attribute);
            attributes.insert("curl_cli".to_owned(), curl);
            attributes.insert("signal".to_owned(), json!(signal.to_string()));
        }
        Ok(ResourceOutcome {
            physical_id: handle_id,
            attributes,
            data: json!({ "token": token, "url": token_url }),
        })
    }

    async fn update(
        &self,
        request: &ResourceRequest,
        current: &Resource,
    ) -> Result<ResourceOutcome, ResourceFailure> {
        // Only Heat's handle has a property (the transport): keep the
        // handle and its secret, as Heat does.
        let mut outcome = self.create(request).await?;
        if let Some(handle_id) = &current.physical_id {
            outcome.physical_id = handle_id.clone();
            outcome.data = current.data.clone();
        }
        Ok(outcome)
    }

    async fn delete(&self, current: &Resource) -> Result<(), ResourceFailure> {
        if let Some(handle_id) = &current.physical_id {
            self.conditions
                .signals()
                .clear_wait_signals(current.stack_id, handle_id)
                .await?;
        }
        Ok(())
    }

    fn needs_replacement(&self, old: &Map<String, Value>, new: &Map<String, Value>) -> bool {
        self.replaced_on_update || old.get("signal_transport") != new.get("signal_transport")
    }

    /// Every step is redone: a create's handle was seen by no one before
    /// it completed, and a delete clears what is stored, once or twice.
    fn take_over(&self, _step: crate::domain::StackAction) -> Result<(), String> {
        Ok(())
    }

    /// The CloudFormation handles are referred to by their signal URL.
    fn reference(&self, current: &Resource) -> Value {
        match self.style {
            HandleStyle::CloudFormation => current.data.get("url").cloned().unwrap_or(Value::Null),
            HandleStyle::Heat => current
                .physical_id
                .clone()
                .map_or(Value::Null, Value::String),
        }
    }
}
