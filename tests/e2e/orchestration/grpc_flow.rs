//! The same life through the gateway's gRPC services (what `grpcurl` and the
//! CLI call): StackService, ResourceService and EventService.

use ember_api_gateway::rest::orchestration::protobuf_json::{
    map_to_struct, optional_value_to_json, struct_to_json,
};
use ember_proto::engine::v1 as pb;
use ember_proto::engine::v1::event_service_client::EventServiceClient;
use ember_proto::engine::v1::resource_service_client::ResourceServiceClient;
use ember_proto::engine::v1::stack_service_client::StackServiceClient;
use ember_tests::{TestEmber, poll_until_ok, with_bearer};
use serde_json::json;
use tonic::transport::Channel;

async fn wait_until_settled(
    stacks: &mut StackServiceClient<Channel>,
    token: &str,
    stack: &str,
) -> pb::Stack {
    poll_until_ok(&format!("{stack} to settle"), super::SETTLE, || {
        let mut stacks = stacks.clone();
        async move {
            let found = stacks
                .get_stack(with_bearer(
                    pb::GetStackRequest {
                        stack: stack.to_owned(),
                    },
                    token,
                ))
                .await
                .expect("get stack")
                .into_inner();
            if found.status == pb::ActionStatus::InProgress as i32 {
                Err(format!("still {}", found.stack_status))
            } else {
                Ok(found)
            }
        }
    })
    .await
}

#[tokio::test]
async fn a_stack_is_created_inspected_updated_and_deleted_over_grpc() {
    let ember = TestEmber::start().await;
    let channel = ember.gateway_channel().await;
    let token = ember.member_token().to_owned();
    let mut stacks = StackServiceClient::new(channel.clone());
    let mut resources = ResourceServiceClient::new(channel.clone());
    let mut events = EventServiceClient::new(channel);

    let parameters = json!({"greeting": "over grpc", "length": 4});
    let created = stacks
        .create_stack(with_bearer(
            pb::CreateStackRequest {
                stack_name: "rpc".to_owned(),
                template: super::stack_template().to_string(),
                parameters: parameters.as_object().cloned().map(map_to_struct),
                ..pb::CreateStackRequest::default()
            },
            &token,
        ))
        .await
        .expect("create")
        .into_inner();
    assert_eq!(created.stack_status, "CREATE_IN_PROGRESS");
    let stack = wait_until_settled(&mut stacks, &token, &created.id).await;
    assert_eq!(stack.stack_status, "CREATE_COMPLETE", "{stack:?}");
    assert_eq!(
        struct_to_json(stack.parameters.as_ref())["greeting"],
        "over grpc"
    );

    let listed = resources
        .list_resources(with_bearer(
            pb::ListResourcesRequest {
                stack: "rpc".to_owned(),
                types: vec!["OS::Heat::RandomString".to_owned()],
                ..pb::ListResourcesRequest::default()
            },
            &token,
        ))
        .await
        .expect("list resources")
        .into_inner();
    assert_eq!(listed.resources.len(), 1);
    assert_eq!(listed.resources[0].resource_name, "random");

    let output = stacks
        .get_output(with_bearer(
            pb::GetOutputRequest {
                stack: "rpc".to_owned(),
                output_key: "greeting".to_owned(),
            },
            &token,
        ))
        .await
        .expect("output")
        .into_inner();
    assert_eq!(
        optional_value_to_json(output.output_value.as_ref()),
        "over grpc"
    );

    let page = events
        .list_events(with_bearer(
            pb::ListEventsRequest {
                stack: "rpc".to_owned(),
                limit: 3,
                ..pb::ListEventsRequest::default()
            },
            &token,
        ))
        .await
        .expect("events")
        .into_inner();
    assert_eq!(page.events.len(), 3);
    assert!(!page.next_marker.is_empty());
    assert_eq!(page.events[0].resource_status, "CREATE_IN_PROGRESS");

    let patch = json!({"greeting": "patched"});
    stacks
        .update_stack(with_bearer(
            pb::UpdateStackRequest {
                stack: "rpc".to_owned(),
                existing: true,
                parameters: patch.as_object().cloned().map(map_to_struct),
                ..pb::UpdateStackRequest::default()
            },
            &token,
        ))
        .await
        .expect("update");
    let stack = wait_until_settled(&mut stacks, &token, &created.id).await;
    assert_eq!(stack.stack_status, "UPDATE_COMPLETE", "{stack:?}");
    let greeting = stack
        .outputs
        .iter()
        .find(|output| output.output_key == "greeting")
        .expect("greeting");
    assert_eq!(
        optional_value_to_json(greeting.output_value.as_ref()),
        "patched"
    );

    let deleting = stacks
        .delete_stack(with_bearer(
            pb::GetStackRequest {
                stack: "rpc".to_owned(),
            },
            &token,
        ))
        .await
        .expect("delete")
        .into_inner();
    assert_eq!(deleting.stack_status, "DELETE_IN_PROGRESS");
    let stack = wait_until_settled(&mut stacks, &token, &created.id).await;
    assert_eq!(stack.stack_status, "DELETE_COMPLETE", "{stack:?}");
    let by_name = stacks
        .get_stack(with_bearer(
            pb::GetStackRequest {
                stack: "rpc".to_owned(),
            },
            &token,
        ))
        .await
        .expect_err("deleted stacks are not found by name");
    assert_eq!(by_name.code(), tonic::Code::NotFound);
    ember.stop().await;
}
