//! The openstack backend's resource types against a real OpenStack
//! (tests/openstack/cloud.sh): each type made, read, changed and deleted on
//! the services themselves, as the stack's owner through a real trust.
//! Without the cloud these tests say so and do nothing (see
//! `ember_openstack::testing`).

// Each type's tests use a part of the harness; the parts some of them do
// not use are not dead.
#[allow(dead_code)]
mod harness;
mod network;
mod storage;

use harness::Harness;

#[tokio::test]
async fn a_stacks_resources_act_as_its_owner_through_its_trust() {
    let Some(harness) =
        Harness::start("a_stacks_resources_act_as_its_owner_through_its_trust").await
    else {
        return;
    };
    let session = harness
        .cloud
        .stack_session(harness.stack_id)
        .await
        .expect("the stack's delegation");
    let token = session.token().await.expect("the trust authenticates");
    let demo = &harness.test_cloud.facts.demo;
    assert_eq!(token.user_id, demo.user_id, "as demo (impersonation)");
    assert_eq!(token.project_id.as_deref(), Some(demo.project_id.as_str()));
    assert_eq!(token.trust_id.as_deref(), Some(harness.trust_id.as_str()));
    // A stack without a delegation acts for nobody.
    let orphan = harness
        .cloud
        .stack_session(uuid::Uuid::now_v7())
        .await
        .expect_err("no delegation");
    assert!(orphan.to_string().contains("has no delegation"), "{orphan}");
}
