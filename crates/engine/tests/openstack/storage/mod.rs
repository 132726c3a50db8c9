//! The storage types and Nova's key pairs and server groups against the
//! real cloud: volumes (made, found again, grown, renamed, deleted, found
//! by their marker), attachments to a real server, key pairs, server
//! groups and images imported from a URL, each looked at through demo's
//! own clients.

mod attachments;
mod images;
mod key_pairs_and_groups;
mod volume_types;
mod volumes;

use std::future::Future;
use std::time::{Duration, Instant};

use ember_engine::domain::Resource;
use ember_engine::resources::{ResourceOutcome, ResourceRequest};
use ember_openstack::nova::{NewServer, Nova, ServerNetworks};

use crate::harness::{Harness, unique};

/// Polls `probe` until it answers `Some`, for at most `limit`.
pub async fn wait_until<T, F, Fut>(what: &str, limit: Duration, mut probe: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = Instant::now() + limit;
    let mut pause = Duration::from_millis(100);
    loop {
        if let Some(found) = probe().await {
            return found;
        }
        assert!(Instant::now() < deadline, "{what}: not within {limit:?}");
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(Duration::from_secs(1));
    }
}

/// The row a create left nothing recorded in (a crash before the
/// executor wrote the physical id).
pub fn unrecorded(harness: &Harness, request: &ResourceRequest) -> Resource {
    let mut row = harness.created(request, &ResourceOutcome::default());
    row.physical_id = None;
    row
}

/// A server of demo's (no network: the fake driver boots it anyway),
/// ACTIVE; returns demo's Nova and the server's id.
pub async fn boot_server(harness: &Harness) -> (Nova, String) {
    let facts = &harness.test_cloud.facts;
    let nova = Nova::connect(&harness.demo()).await.expect("demo's Nova");
    let server = nova
        .create_server(&NewServer {
            name: unique("storage-srv"),
            image_id: Some(facts.image.id.clone()),
            flavor_id: facts.flavors["ember.tiny"].clone(),
            networks: Some(ServerNetworks::None),
            ..NewServer::default()
        })
        .await
        .expect("a server");
    wait_until("the server ACTIVE", Duration::from_secs(120), || async {
        let server = nova.server(&server.id).await.expect("read")?;
        assert_ne!(server.status, "ERROR", "{:?}", server.fault);
        (server.status == "ACTIVE").then_some(())
    })
    .await;
    (nova, server.id)
}

/// Deletes demo's server and waits until it is gone.
pub async fn delete_server(nova: &Nova, server_id: &str) {
    nova.delete_server(server_id).await.expect("asked");
    wait_until("the server gone", Duration::from_secs(120), || async {
        nova.server(server_id)
            .await
            .expect("read")
            .is_none()
            .then_some(())
    })
    .await;
}
