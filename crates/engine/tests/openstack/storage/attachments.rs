//! Volume attachments to a real server (Nova's fake driver, Cinder's fake
//! volume driver): attached, adopted, detached, and a volume update that
//! must detach and attach back.

use std::time::Duration;

use ember_openstack::cinder::Cinder;
use ember_openstack::nova::Nova;
use serde_json::json;

use super::{boot_server, delete_server, unrecorded, wait_until};
use crate::harness::Harness;

const ATTACHMENT: &str = "OS::Cinder::VolumeAttachment";

/// Whether Nova lists `volume_id` among the server's attachments.
async fn nova_lists(nova: &Nova, server_id: &str, volume_id: &str) -> bool {
    nova.volume_attachments(server_id)
        .await
        .expect("listed")
        .iter()
        .any(|attachment| attachment.volume_id == volume_id)
}

async fn status_of(cinder: &Cinder, volume_id: &str) -> String {
    cinder
        .volume(volume_id)
        .await
        .expect("read")
        .expect("the volume")
        .status
}

#[tokio::test]
async fn a_volume_is_attached_to_a_server_and_detached() {
    let Some(harness) = Harness::start("a_volume_is_attached_to_a_server_and_detached").await
    else {
        return;
    };
    let (nova, server_id) = boot_server(&harness).await;
    let cinder = Cinder::connect(&harness.demo())
        .await
        .expect("demo's Cinder");
    let volume = harness
        .create("OS::Cinder::Volume", "data", json!({"size": 1}))
        .await;
    let volume_id = volume.physical_id.clone().expect("made");

    let request = harness.request(
        ATTACHMENT,
        "data_attachment",
        json!({"instance_uuid": server_id, "volume_id": volume_id}),
    );
    let attachment_type = harness.resource_type(ATTACHMENT);
    let outcome = attachment_type.create(&request).await.expect("attached");
    // Heat's physical id: Nova's attachment id, the volume's.
    assert_eq!(outcome.physical_id, volume_id);
    assert_eq!(status_of(&cinder, &volume_id).await, "in-use");
    assert!(nova_lists(&nova, &server_id, &volume_id).await);
    let attached = cinder.volume(&volume_id).await.expect("read").expect("it");
    assert_eq!(attached.attachments[0].server_id, server_id);
    assert_eq!(outcome.attributes["serverId"], json!(server_id));

    // The same row's create again adopts the attachment.
    let again = attachment_type.create(&request).await.expect("adopted");
    assert_eq!(again.physical_id, volume_id);
    let row = harness.created(&request, &outcome);

    // A volume update that needs it detached (read-only) attaches it back.
    let volume_type = harness.resource_type("OS::Cinder::Volume");
    let read_only = harness.request_in(
        harness.stack_id,
        volume.id,
        "OS::Cinder::Volume",
        "data",
        json!({"size": 1, "read_only": true}),
    );
    let updated = volume_type
        .update(&read_only, &volume)
        .await
        .expect("made read-only");
    let volume = harness.created(&read_only, &updated);
    let reread = cinder.volume(&volume_id).await.expect("read").expect("it");
    assert_eq!(reread.status, "in-use", "attached back");
    assert_eq!(reread.attachments[0].server_id, server_id);
    assert!(
        !reread.metadata.contains_key("ember_reattach"),
        "{:?}",
        reread.metadata
    );
    // Cinder shows the read-only flag among the metadata.
    assert_eq!(
        reread.metadata.get("readonly").map(String::as_str),
        Some("True"),
        "{:?}",
        reread.metadata
    );
    assert_eq!(
        updated.attributes["attachments_list"][0]["server_id"],
        json!(server_id)
    );

    // Deleting the volume while attached is refused, in Heat's words.
    let refused = volume_type.delete(&volume).await.expect_err("in use");
    assert_eq!(refused.to_string(), "Volume in use");

    harness.delete(&row).await;
    assert_eq!(status_of(&cinder, &volume_id).await, "available");
    assert!(!nova_lists(&nova, &server_id, &volume_id).await);
    // Detaching what is detached is done.
    harness.delete(&row).await;

    // A create that was in flight may have attached it: a delete of its
    // row (no physical id) detaches what it finds.
    attachment_type.create(&request).await.expect("attached");
    assert_eq!(status_of(&cinder, &volume_id).await, "in-use");
    attachment_type
        .resume_delete(&unrecorded(&harness, &request))
        .await
        .expect("detached");
    assert_eq!(status_of(&cinder, &volume_id).await, "available");

    harness.delete(&volume).await;
    delete_server(&nova, &server_id).await;
}

#[tokio::test]
async fn an_aws_attachment_names_its_device_and_is_immutable() {
    let Some(harness) = Harness::start("an_aws_attachment_names_its_device_and_is_immutable").await
    else {
        return;
    };
    let (nova, server_id) = boot_server(&harness).await;
    let cinder = Cinder::connect(&harness.demo())
        .await
        .expect("demo's Cinder");
    let volume = harness
        .create(
            "AWS::EC2::Volume",
            "DataVolume",
            json!({"AvailabilityZone": "nova", "Size": 1}),
        )
        .await;
    let volume_id = volume.physical_id.clone().expect("made");
    let attachment_type = harness.resource_type("AWS::EC2::VolumeAttachment");

    let wrong = harness.request(
        "AWS::EC2::VolumeAttachment",
        "MountPoint",
        json!({"InstanceId": server_id, "VolumeId": volume_id, "Device": "/dev/sdb"}),
    );
    let refused = attachment_type
        .create(&wrong)
        .await
        .expect_err("no such device");
    assert_eq!(
        refused.to_string(),
        "Device: \"/dev/sdb\" does not match pattern \"/dev/vd[b-z]\""
    );

    let request = harness.request(
        "AWS::EC2::VolumeAttachment",
        "MountPoint",
        json!({"InstanceId": server_id, "VolumeId": volume_id, "Device": "/dev/vdc"}),
    );
    let outcome = attachment_type.create(&request).await.expect("attached");
    assert_eq!(outcome.physical_id, volume_id);
    assert_eq!(status_of(&cinder, &volume_id).await, "in-use");
    assert!(nova_lists(&nova, &server_id, &volume_id).await);
    let row = harness.created(&request, &outcome);

    let moved = harness.request_in(
        harness.stack_id,
        row.id,
        "AWS::EC2::VolumeAttachment",
        "MountPoint",
        json!({"InstanceId": server_id, "VolumeId": volume_id, "Device": "/dev/vdd"}),
    );
    let refused = attachment_type
        .update(&moved, &row)
        .await
        .expect_err("immutable");
    assert_eq!(
        refused.to_string(),
        "Update to properties Device of MountPoint (AWS::EC2::VolumeAttachment) is not supported."
    );

    harness.delete(&row).await;
    wait_until("the volume available", Duration::from_secs(30), || async {
        (status_of(&cinder, &volume_id).await == "available").then_some(())
    })
    .await;
    assert!(!nova_lists(&nova, &server_id, &volume_id).await);
    harness.delete(&volume).await;
    delete_server(&nova, &server_id).await;
}

#[tokio::test]
async fn an_attachment_moves_to_another_volume_in_place() {
    let Some(harness) = Harness::start("an_attachment_moves_to_another_volume_in_place").await
    else {
        return;
    };
    let (nova, server_id) = boot_server(&harness).await;
    let cinder = Cinder::connect(&harness.demo())
        .await
        .expect("demo's Cinder");
    let first = harness
        .create("OS::Cinder::Volume", "first", json!({"size": 1}))
        .await;
    let second = harness
        .create("OS::Cinder::Volume", "second", json!({"size": 1}))
        .await;
    let (first_id, second_id) = (
        first.physical_id.clone().expect("made"),
        second.physical_id.clone().expect("made"),
    );
    let row = harness
        .create(
            ATTACHMENT,
            "attachment",
            json!({"instance_uuid": server_id, "volume_id": first_id}),
        )
        .await;
    let attachment_type = harness.resource_type(ATTACHMENT);
    let moved = harness.request_in(
        harness.stack_id,
        row.id,
        ATTACHMENT,
        "attachment",
        json!({"instance_uuid": server_id, "volume_id": second_id}),
    );
    assert!(!attachment_type.needs_replacement(
        row.properties.as_object().expect("a map"),
        &moved.properties
    ));
    let outcome = attachment_type.update(&moved, &row).await.expect("moved");
    assert_eq!(outcome.physical_id, second_id);
    assert_eq!(status_of(&cinder, &first_id).await, "available");
    assert_eq!(status_of(&cinder, &second_id).await, "in-use");
    let row = harness.created(&moved, &outcome);
    harness.delete(&row).await;
    assert_eq!(status_of(&cinder, &second_id).await, "available");
    harness.delete(&first).await;
    harness.delete(&second).await;
    delete_server(&nova, &server_id).await;
}
