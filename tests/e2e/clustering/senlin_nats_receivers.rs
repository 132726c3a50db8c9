//! Senlin message receivers fed from NATS JetStream: with
//! `lifecycle_hook.nats_url` set, a message published to
//! `<prefix>.<project>.senlin-receiver-<id>` runs like one posted with
//! Zaqar's call (the cluster scales out), in Zaqar's message form or as a
//! bare body; a bad one is terminated — not redelivered — and leaves an
//! ERROR event on the receiver; one whose subject names another project
//! than the queue's runs nothing; while the engine cannot be reached a
//! message is redelivered, and posted once it can.
//!
//! Each test has a stream and subject prefix of its own, so tests sharing
//! one NATS server never take each other's messages. They need a NATS
//! server with JetStream (`EMBER_TEST_NATS_URL`; CI sets it), and skip,
//! saying so on stderr, without one.

use std::time::Duration;

use async_nats::jetstream;
use ember_lifecycle_hook::config::LifecycleHookSection;
use ember_lifecycle_hook::workers::receivers::CONSUMER;
use ember_tests::{TestEmber, wait_for};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::clustering::clusters::Rest;
use crate::clustering::senlin_messages::{active_cluster, message_receiver, wait_scale_outs};

/// The NATS server of the tests, or `None` (said on stderr) without one.
fn nats_url(test: &str) -> Option<String> {
    let url = std::env::var("EMBER_TEST_NATS_URL").ok();
    if url.is_none() {
        eprintln!("EMBER_TEST_NATS_URL is not set: skipping the NATS receiver test {test}");
    }
    url
}

/// This test's own stream and subject prefix.
struct Isolated {
    stream: String,
    prefix: String,
}

impl Isolated {
    fn new() -> Isolated {
        let id = uuid::Uuid::now_v7().simple();
        Isolated {
            stream: format!("E2E_RECEIVERS_{id}"),
            prefix: format!("e2e-{id}.receivers"),
        }
    }

    fn configure(&self, section: &mut LifecycleHookSection, nats_url: &str) {
        section.nats_url = nats_url.to_owned();
        section.receivers_stream = self.stream.clone();
        section.receivers_subject_prefix = self.prefix.clone();
    }

    fn subject(&self, project: &str, queue: &str) -> String {
        format!("{}.{project}.{queue}", self.prefix)
    }
}

async fn jetstream(nats_url: &str) -> jetstream::Context {
    let client = async_nats::connect(nats_url).await.expect("NATS");
    jetstream::new(client)
}

/// The stream, once lifecycle-hook made it.
async fn made_stream(jetstream: &jetstream::Context, name: &str) -> jetstream::stream::Stream {
    let deadline = std::time::Instant::now() + Duration::from_secs(15);
    loop {
        match jetstream.get_stream(name).await {
            Ok(stream) => return stream,
            Err(error) => {
                assert!(
                    std::time::Instant::now() < deadline,
                    "lifecycle-hook made no stream {name}: {error}"
                );
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }
}

/// Publishes `payload` and waits for the stream to store it.
async fn publish(jetstream: &jetstream::Context, subject: String, payload: &[u8]) {
    jetstream
        .publish(subject.clone(), payload.to_vec().into())
        .await
        .unwrap_or_else(|error| panic!("publish to {subject}: {error}"))
        .await
        .unwrap_or_else(|error| panic!("{subject} stored: {error}"));
}

/// The shared consumer's state once every message published so far was
/// handled (acknowledged or terminated).
async fn drained(stream: &jetstream::stream::Stream) -> jetstream::consumer::Info {
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        let info = stream.consumer_info(CONSUMER).await;
        if let Ok(info) = &info
            && info.num_pending == 0
            && info.num_ack_pending == 0
        {
            return info.clone();
        }
        assert!(
            std::time::Instant::now() < deadline,
            "every published message handled: {info:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn error_events(rest: &Rest<'_>, receiver_id: &str) -> Vec<Value> {
    rest.get(&format!("/events?oid={receiver_id}&level=ERROR"))
        .await["events"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn messages_published_to_nats_scale_a_cluster_and_bad_ones_are_dropped_once() {
    let Some(nats_url) = nats_url("messages_published_to_nats_scale_a_cluster") else {
        return;
    };
    let isolated = Isolated::new();
    let ember = TestEmber::start_configured(|config| {
        isolated.configure(&mut config.lifecycle_hook, &nats_url);
    })
    .await;
    let rest = Rest::member(&ember);
    let cluster_id = active_cluster(&rest, "web", 1).await;
    let (receiver_id, queue) = message_receiver(&rest, "bus").await;
    let jetstream = jetstream(&nats_url).await;
    let stream = made_stream(&jetstream, &isolated.stream).await;
    let limits = stream.cached_info().config.clone();
    assert_eq!(
        limits.max_age,
        Duration::from_secs(7 * 24 * 3600),
        "{limits:?}"
    );
    assert_eq!(limits.max_bytes, 1024 * 1024 * 1024, "{limits:?}");

    // Zaqar's message object, then a bare body: each runs as posted.
    publish(
        &jetstream,
        isolated.subject("demo", &queue),
        json!({"body": {"cluster": "web", "action": "CLUSTER_SCALE_OUT", "params": {"count": 1}},
            "ttl": 300})
        .to_string()
        .as_bytes(),
    )
    .await;
    wait_scale_outs(&rest, &cluster_id, 1).await;
    assert_eq!(rest.nodes(&cluster_id).await.len(), 2);
    publish(
        &jetstream,
        isolated.subject("demo", &queue),
        json!({"cluster": &cluster_id[..8], "action": "CLUSTER_SCALE_OUT", "params": {"count": 2}})
            .to_string()
            .as_bytes(),
    )
    .await;
    wait_scale_outs(&rest, &cluster_id, 2).await;
    assert_eq!(rest.nodes(&cluster_id).await.len(), 4);

    // Bad messages: each refused once, with an ERROR event on the
    // receiver saying why, and never handed out again.
    publish(
        &jetstream,
        isolated.subject("demo", &queue),
        json!({"cluster": "web"}).to_string().as_bytes(),
    )
    .await;
    publish(&jetstream, isolated.subject("demo", &queue), b"grow").await;
    publish(
        &jetstream,
        isolated.subject("demo", &queue),
        json!({"body": {"cluster": "web", "action": "CLUSTER_CHECK"}, "ttl": 5})
            .to_string()
            .as_bytes(),
    )
    .await;
    let info = drained(&stream).await;
    assert_eq!(
        info.delivered.consumer_sequence, info.delivered.stream_sequence,
        "no message was delivered twice: {info:?}"
    );
    wait_for("three refusal events", Duration::from_secs(10), || async {
        error_events(&rest, &receiver_id).await.len() == 3
    })
    .await;
    let mut reasons: Vec<String> = error_events(&rest, &receiver_id)
        .await
        .iter()
        .map(|event| {
            assert_eq!(event["otype"], "RECEIVER", "{event}");
            event["status_reason"].as_str().expect("reason").to_owned()
        })
        .collect();
    reasons.sort();
    let refused = "a message from the message bus was refused: messages[0]: ";
    assert_eq!(
        reasons[0],
        format!("{refused}Both cluster identity and action must be specified."),
    );
    assert_eq!(
        reasons[1],
        format!(
            "{refused}The TTL for a message may not exceed 1209600 seconds, and must be at least 60 seconds long."
        ),
    );
    assert!(
        reasons[2].starts_with(&format!("{refused}the body is not JSON")),
        "{reasons:?}"
    );
    let checks = rest
        .get(&format!(
            "/actions?cluster_id={cluster_id}&action=CLUSTER_CHECK"
        ))
        .await;
    assert_eq!(checks["actions"], json!([]), "{checks}");
    assert_eq!(rest.nodes(&cluster_id).await.len(), 4, "nothing else ran");

    // The subject's project decides whose queue it is: another project's
    // receiver's queue under this project's subject (or a queue no
    // receiver has) runs nothing; under its own project it runs.
    let other = Rest {
        ember: &ember,
        token: ember.outsider_token(),
    };
    let their_cluster = active_cluster(&other, "theirs", 1).await;
    let (their_receiver, their_queue) = message_receiver(&other, "their-bus").await;
    let scale_theirs = json!({"cluster": their_cluster, "action": "CLUSTER_SCALE_OUT"}).to_string();
    publish(
        &jetstream,
        isolated.subject("demo", &their_queue),
        scale_theirs.as_bytes(),
    )
    .await;
    publish(
        &jetstream,
        isolated.subject("demo", "senlin-receiver-nobody"),
        scale_theirs.as_bytes(),
    )
    .await;
    let info = drained(&stream).await;
    assert_eq!(
        info.delivered.consumer_sequence, info.delivered.stream_sequence,
        "{info:?}"
    );
    let actions = other
        .get(&format!(
            "/actions?cluster_id={their_cluster}&action=CLUSTER_SCALE_OUT"
        ))
        .await;
    assert_eq!(actions["actions"], json!([]), "{actions}");
    assert_eq!(other.nodes(&their_cluster).await.len(), 1);
    assert_eq!(
        error_events(&other, &their_receiver).await,
        Vec::<Value>::new(),
        "no event in the queue's project"
    );
    assert_eq!(
        error_events(&rest, &receiver_id).await.len(),
        3,
        "none in the subject's"
    );
    publish(
        &jetstream,
        isolated.subject("other", &their_queue),
        scale_theirs.as_bytes(),
    )
    .await;
    wait_scale_outs(&other, &their_cluster, 1).await;
    assert_eq!(other.nodes(&their_cluster).await.len(), 2);

    ember.stop().await;
    jetstream
        .delete_stream(&isolated.stream)
        .await
        .expect("delete the test's stream");
}

/// A lifecycle-hook of its own, engine at `engine_url`; stopped by
/// cancelling the token.
async fn lifecycle_hook(
    section: LifecycleHookSection,
    credential: &str,
) -> (
    CancellationToken,
    tokio::task::JoinHandle<()>,
    tempfile::TempDir,
) {
    let data_dir = tempfile::tempdir().expect("data dir");
    let config = section.resolve(data_dir.path(), credential);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let shutdown = CancellationToken::new();
    let task = tokio::spawn({
        let shutdown = shutdown.clone();
        async move {
            ember_lifecycle_hook::serve(config, listener, shutdown)
                .await
                .expect("lifecycle-hook runs");
        }
    });
    (shutdown, task, data_dir)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn while_the_engine_is_unreachable_nats_messages_are_redelivered_then_run() {
    let Some(nats_url) = nats_url("while_the_engine_is_unreachable") else {
        return;
    };
    let isolated = Isolated::new();
    // Ember itself without NATS: receivers by REST only, no consumer.
    let ember = TestEmber::start().await;
    let rest = Rest::member(&ember);
    let cluster_id = active_cluster(&rest, "web", 1).await;
    let (_, queue) = message_receiver(&rest, "bus").await;
    let jetstream = jetstream(&nats_url).await;

    // A lifecycle-hook whose engine does not answer.
    let nowhere = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        listener.local_addr().expect("address")
    };
    let mut section = LifecycleHookSection {
        engine_url: format!("http://{nowhere}"),
        ..LifecycleHookSection::default()
    };
    isolated.configure(&mut section, &nats_url);
    let credential = ember.secrets().internal_credential.clone();
    let (shutdown, task, _data) = lifecycle_hook(section.clone(), &credential).await;
    let stream = made_stream(&jetstream, &isolated.stream).await;
    publish(
        &jetstream,
        isolated.subject("demo", &queue),
        json!({"cluster": "web", "action": "CLUSTER_SCALE_OUT"})
            .to_string()
            .as_bytes(),
    )
    .await;
    wait_for(
        "the message handed out again",
        Duration::from_secs(20),
        || async {
            stream
                .consumer_info(CONSUMER)
                .await
                .is_ok_and(|info| info.delivered.consumer_sequence >= 2)
        },
    )
    .await;
    shutdown.cancel();
    task.await.expect("lifecycle-hook stops");
    assert_eq!(rest.nodes(&cluster_id).await.len(), 1, "nothing ran yet");

    // Another replica, with the engine: the same consumer hands it the
    // message, which runs.
    section.engine_url = format!("http://{}", ember.running.engine_addr);
    let (shutdown, task, _data) = lifecycle_hook(section, &credential).await;
    wait_scale_outs(&rest, &cluster_id, 1).await;
    assert_eq!(rest.nodes(&cluster_id).await.len(), 2);
    let info = drained(&stream).await;
    assert_eq!(info.num_pending, 0, "{info:?}");
    shutdown.cancel();
    task.await.expect("lifecycle-hook stops");
    ember.stop().await;
    jetstream
        .delete_stream(&isolated.stream)
        .await
        .expect("delete the test's stream");
}
