//! Readiness that tells the truth (issue 13): `/healthz` shows what each
//! service's checks found, a starved database pool makes the deployment
//! degraded — naming the service and the pool — and `/metrics` carries the
//! figures behind the checks.

use std::time::Duration;

use ember_tests::{TestEmber, wait_for};
use sea_orm::{ConnectionTrait, TransactionTrait};
use serde_json::{Value, json};

async fn healthz(ember: &TestEmber) -> (u16, Value) {
    let response = ember
        .http
        .get(ember.url("/healthz"))
        .send()
        .await
        .expect("healthz");
    let status = response.status().as_u16();
    (status, response.json().await.expect("json"))
}

fn check<'a>(body: &'a Value, service: &str, name: &str) -> &'a Value {
    body["checks"][service]
        .as_array()
        .and_then(|checks| checks.iter().find(|check| check["name"] == name))
        .unwrap_or_else(|| panic!("no check {name:?} of {service}: {body}"))
}

#[tokio::test]
async fn healthz_shows_every_check_and_metrics_carry_their_figures() {
    let ember = TestEmber::start().await;
    // The first round of checks runs as each service starts.
    wait_for("every service's checks", Duration::from_secs(5), || async {
        let (_, body) = healthz(&ember).await;
        ["engine", "lifecycle-hook", "plugin-registry"]
            .iter()
            .all(|service| {
                body["checks"][service]
                    .as_array()
                    .is_some_and(|c| !c.is_empty())
            })
    })
    .await;
    let (status, body) = healthz(&ember).await;
    assert_eq!(status, 200, "{body}");
    for (service, name) in [
        ("engine", "database (writer)"),
        ("engine", "database (reader)"),
        ("engine", "queue stack transitions"),
        ("lifecycle-hook", "database (writer)"),
        ("lifecycle-hook", "queue overdue deliveries"),
        ("lifecycle-hook", "queue overdue deadlines"),
        ("plugin-registry", "database (writer)"),
    ] {
        let check = check(&body, service, name);
        assert_eq!(check["healthy"], true, "{service} {name}: {body}");
        assert!(
            check["detail"]
                .as_str()
                .is_some_and(|detail| !detail.is_empty()),
            "{body}"
        );
    }

    let metrics = ember.metrics().await;
    for expected in [
        "# TYPE ember_database_probe_seconds gauge",
        "ember_database_probe_seconds{service=\"engine\",pool=\"writer\"}",
        "ember_database_connections{service=\"engine\",pool=\"writer\",state=\"busy\"}",
        "ember_work_queue_depth{service=\"engine\",queue=\"stack transitions\"} 0",
        "ember_work_queue_depth{service=\"lifecycle-hook\",queue=\"overdue deliveries\"} 0",
        "ember_database_probe_seconds{service=\"plugin-registry\",pool=\"writer\"}",
        "ember_gateway_upstream_errors_total 0",
    ] {
        assert!(
            metrics.contains(expected),
            "{expected:?} missing:\n{metrics}"
        );
    }
    ember.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_starved_engine_database_makes_the_deployment_degraded_until_it_recovers() {
    let ember = TestEmber::start().await;
    // Another process holds SQLite's write lock on the engine's database:
    // the engine's one writer connection waits on it as soon as it writes.
    let path = ember.data_dir.path().join("engine.db");
    let holder = sea_orm::Database::connect(format!("sqlite://{}", path.display()))
        .await
        .expect("connects to the engine's database");
    let lock = holder.begin().await.expect("begin");
    lock.execute_unprepared("CREATE TABLE write_lock_holder (x INTEGER)")
        .await
        .expect("takes the write lock");

    // A create now holds the engine's writer connection, waiting.
    let create = {
        let http = ember.http.clone();
        let url = ember.url("/orchestration/v1/demo/stacks");
        let token = ember.member_token().to_owned();
        tokio::spawn(async move {
            http.post(url)
                .header("X-Auth-Token", token)
                .json(&json!({"stack_name": "waits",
                    "template": {"heat_template_version": "2021-04-16", "resources": {}}}))
                .send()
                .await
                .map(|response| response.status().as_u16())
        })
    };
    let started = std::time::Instant::now();
    let degraded = loop {
        let (status, body) = healthz(&ember).await;
        if status == 503 {
            break body;
        }
        assert!(
            started.elapsed() < Duration::from_secs(9),
            "/healthz never reported the engine's starved pool: {body}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(degraded["status"], "degraded", "{degraded}");
    let engine = degraded["services"]["engine"].as_str().unwrap_or_default();
    assert!(
        engine.starts_with("NOT_SERVING: database (writer): waited more than 5 s"),
        "the engine's status names the starved pool: {degraded}"
    );
    assert_eq!(
        check(&degraded, "engine", "database (writer)")["healthy"],
        false
    );
    assert_eq!(
        degraded["services"]["lifecycle-hook"], "SERVING",
        "{degraded}"
    );

    // The lock goes away: the create goes through and the engine is ready.
    lock.rollback().await.expect("releases the write lock");
    let status = create.await.expect("task").expect("answered");
    assert_eq!(status, 201, "the waiting create completed");
    wait_for("/healthz ok again", Duration::from_secs(10), || async {
        healthz(&ember).await.0 == 200
    })
    .await;
    ember.stop().await;
}
