//! `ember.engine.v1.InstanceService` through the gateway, with tonic and
//! with grpcurl (whose `describe` shows the proto comments operators read).

use std::time::Duration;

use ember_proto::engine::v1 as pb;
use ember_proto::engine::v1::instance_service_client::InstanceServiceClient;
use ember_tests::{TestEmber, wait_for, with_bearer};
use tonic::Code;
use tonic::transport::Channel;

use super::Callers;

async fn client(ember: &TestEmber) -> InstanceServiceClient<Channel> {
    InstanceServiceClient::new(ember.gateway_channel().await)
}

async fn get(ember: &TestEmber, token: &str, uuid: &str) -> pb::Instance {
    client(ember)
        .await
        .get_instance(with_bearer(
            pb::GetInstanceRequest {
                uuid: uuid.to_owned(),
            },
            token,
        ))
        .await
        .expect("get")
        .into_inner()
}

async fn wait_for_grpc_status(
    ember: &TestEmber,
    token: &str,
    uuid: &str,
    status: pb::InstanceStatus,
) {
    wait_for(
        &format!("instance {uuid} to be {status:?}"),
        Duration::from_secs(15),
        || async { get(ember, token, uuid).await.status == status as i32 },
    )
    .await;
}

#[tokio::test]
async fn the_instance_service_works_over_grpc_with_the_same_rules() {
    let ember = TestEmber::start().await;
    let callers = Callers::of(&ember);
    let mut instances = client(&ember).await;

    let created = instances
        .create_instance(with_bearer(
            pb::CreateInstanceRequest {
                name: "grpc-1".into(),
                flavor: "m1.small".into(),
                image: "debian-12".into(),
                metadata: [("role".to_owned(), "web".to_owned())].into(),
                ..Default::default()
            },
            &callers.member,
        ))
        .await
        .expect("created")
        .into_inner();
    assert_eq!(created.status, pb::InstanceStatus::Building as i32);
    let uuid = created.uuid.clone();
    wait_for_grpc_status(&ember, &callers.member, &uuid, pb::InstanceStatus::Active).await;
    assert_eq!(
        get(&ember, &callers.member, &uuid).await.power_state,
        pb::PowerState::On as i32
    );

    // An admin of another project locks; the owner is then refused.
    let locked = instances
        .lock_instance(with_bearer(
            pb::LockInstanceRequest {
                uuid: uuid.clone(),
                reason: Some("maintenance".into()),
                ..pb::LockInstanceRequest::default()
            },
            &callers.other_admin,
        ))
        .await
        .expect("locked")
        .into_inner();
    assert!(locked.locked);
    assert_eq!(locked.locked_by, pb::LockedBy::Admin as i32);
    assert_eq!(locked.locked_reason, "maintenance");

    let refused = instances
        .delete_instance(with_bearer(
            pb::DeleteInstanceRequest { uuid: uuid.clone() },
            &callers.member,
        ))
        .await
        .expect_err("locked");
    assert_eq!(refused.code(), Code::FailedPrecondition);
    assert!(
        refused.message().contains("is locked (by admin \"ops\"")
            && refused
                .message()
                .ends_with("maintenance): an admin must unlock it first"),
        "{}",
        refused.message()
    );
    let refused = instances
        .unlock_instance(with_bearer(
            pb::UnlockInstanceRequest { uuid: uuid.clone() },
            &callers.member,
        ))
        .await
        .expect_err("admin lock");
    assert_eq!(refused.code(), Code::PermissionDenied);

    let listed = instances
        .list_instances(with_bearer(
            pb::ListInstancesRequest {
                locked: Some(true),
                ..Default::default()
            },
            &callers.member,
        ))
        .await
        .expect("listed")
        .into_inner();
    assert_eq!(listed.instances.len(), 1);

    let unlocked = instances
        .unlock_instance(with_bearer(
            pb::UnlockInstanceRequest { uuid: uuid.clone() },
            &callers.project_admin,
        ))
        .await
        .expect("unlocked")
        .into_inner();
    assert!(!unlocked.locked);
    let refused = instances
        .unlock_instance(with_bearer(
            pb::UnlockInstanceRequest { uuid: uuid.clone() },
            &callers.member,
        ))
        .await
        .expect_err("not locked");
    assert_eq!(refused.code(), Code::FailedPrecondition);

    let updated = instances
        .update_instance(with_bearer(
            pb::UpdateInstanceRequest {
                uuid: uuid.clone(),
                name: None,
                metadata: Some(pb::InstanceMetadata::default()),
            },
            &callers.member,
        ))
        .await
        .expect("updated")
        .into_inner();
    assert!(updated.metadata.is_empty(), "metadata replaced by nothing");
    assert_eq!(updated.name, "grpc-1");

    let powering_off = instances
        .set_power_state(with_bearer(
            pb::SetPowerStateRequest {
                uuid: uuid.clone(),
                target: pb::PowerAction::Off as i32,
            },
            &callers.member,
        ))
        .await
        .expect("powering off")
        .into_inner();
    assert_eq!(powering_off.power_state, pb::PowerState::PoweringOff as i32);
    wait_for_grpc_status(&ember, &callers.member, &uuid, pb::InstanceStatus::Stopped).await;

    let hidden = instances
        .get_instance(with_bearer(
            pb::GetInstanceRequest { uuid: uuid.clone() },
            &callers.stranger,
        ))
        .await
        .expect_err("another project");
    assert_eq!(hidden.code(), Code::NotFound);
    let malformed = instances
        .get_instance(with_bearer(
            pb::GetInstanceRequest {
                uuid: "web-1".into(),
            },
            &callers.member,
        ))
        .await
        .expect_err("not a uuid");
    assert_eq!(malformed.code(), Code::InvalidArgument);
    let no_action = instances
        .set_power_state(with_bearer(
            pb::SetPowerStateRequest {
                uuid: uuid.clone(),
                target: 0,
            },
            &callers.member,
        ))
        .await
        .expect_err("no target");
    assert_eq!(no_action.code(), Code::InvalidArgument);

    let deleting = instances
        .delete_instance(with_bearer(
            pb::DeleteInstanceRequest { uuid: uuid.clone() },
            &callers.member,
        ))
        .await
        .expect("deleting")
        .into_inner();
    assert_eq!(deleting.status, pb::InstanceStatus::Deleting as i32);
    // Once deleted, the instance is not found (as in Nova), not DELETED.
    let request = |uuid: &str| {
        with_bearer(
            pb::GetInstanceRequest {
                uuid: uuid.to_owned(),
            },
            &callers.member,
        )
    };
    wait_for(
        "the deleted instance to be NOT_FOUND",
        Duration::from_secs(15),
        || async {
            match client(&ember).await.get_instance(request(&uuid)).await {
                Err(status) => status.code() == Code::NotFound,
                Ok(instance) => {
                    assert_eq!(
                        instance.into_inner().status,
                        pb::InstanceStatus::Deleting as i32
                    );
                    false
                }
            }
        },
    )
    .await;
    let again = instances
        .delete_instance(with_bearer(
            pb::DeleteInstanceRequest { uuid: uuid.clone() },
            &callers.member,
        ))
        .await
        .expect_err("deleted");
    assert_eq!(again.code(), Code::NotFound, "{again:?}");
    let listed = instances
        .list_instances(with_bearer(
            pb::ListInstancesRequest::default(),
            &callers.member,
        ))
        .await
        .expect("listed")
        .into_inner();
    assert!(
        listed
            .instances
            .iter()
            .all(|instance| instance.uuid != uuid)
    );
    ember.stop().await;
}

#[tokio::test]
async fn grpcurl_describes_the_instance_service_with_its_comments() {
    let ember = TestEmber::start().await;
    let address = ember.running.gateway_addr.to_string();
    let described = tokio::task::spawn_blocking(move || {
        let program = std::env::var("EMBER_GRPCURL").unwrap_or_else(|_| "grpcurl".to_owned());
        let output = std::process::Command::new(program)
            .args([
                "-plaintext",
                &address,
                "describe",
                "ember.engine.v1.InstanceService",
            ])
            .output()
            .expect("grpcurl runs (./scripts/test installs it)");
        assert!(
            output.status.success(),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
        String::from_utf8_lossy(&output.stdout).into_owned()
    })
    .await
    .expect("grpcurl");
    for expected in [
        "rpc LockInstance",
        "Maintenance lock: while an instance is locked",
        "PERMISSION_DENIED when an owner tries to lift an admin",
    ] {
        assert!(
            described.contains(expected),
            "{expected:?} not in:\n{described}"
        );
    }
    ember.stop().await;
}
