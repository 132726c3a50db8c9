//! Memory under template bombs, measured on the real `ember dev` process:
//! templates whose functions would expand into gigabytes are refused
//! before the expansion is allocated, several at once, and the process
//! gives the memory back (issue 13: four nested-`repeat` bombs took a
//! process from 128 MB to 1.65 GB and it stayed there).

mod support;

use std::time::{Duration, Instant};

use serde_json::{Value, json};
use support::Dev;

/// Resident memory of `pid`, in MiB.
fn rss_mib(pid: u32) -> f64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("proc status");
    let kib: f64 = status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|value| value.split_whitespace().next())
        .and_then(|value| value.parse().ok())
        .expect("VmRSS");
    kib / 1024.0
}

fn bomb(name: &str) -> Value {
    let thousand: Vec<String> = (0..1000).map(|n| format!("{n:0>110}")).collect();
    let inner =
        json!({"repeat": {"for_each": {"<%i%>": thousand}, "template": "<%i%>-<%j%>-<%k%>"}});
    let middle = json!({"repeat": {"for_each": {"<%j%>": thousand}, "template": inner}});
    let outer = json!({"repeat": {"for_each": {"<%k%>": thousand}, "template": middle}});
    json!({"stack_name": name, "template": {"heat_template_version": "2021-04-16",
        "resources": {"v": {"type": "OS::Heat::Value", "properties": {"value": outer}}}}})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn template_bombs_are_refused_before_they_allocate_and_memory_comes_back() {
    let data_dir = tempfile::tempdir().expect("data dir");
    let dev = Dev::start(data_dir.path());
    let credentials: Value = serde_json::from_str(
        &std::fs::read_to_string(data_dir.path().join("dev-credentials.json")).expect("file"),
    )
    .expect("json");
    let gateway = credentials["gateway_url"].as_str().expect("url").to_owned();
    let token = credentials["member"]["token"]
        .as_str()
        .expect("token")
        .to_owned();
    let http = reqwest::Client::new();
    let before = rss_mib(dev.pid());

    let mut peak = before;
    for round in 0..3 {
        let requests = (0..4).map(|index| {
            let http = http.clone();
            let url = format!("{gateway}/orchestration/v1/demo/stacks");
            let token = token.clone();
            let body = bomb(&format!("bomb-{round}-{index}"));
            async move {
                let response = http
                    .post(url)
                    .header("X-Auth-Token", token)
                    .json(&body)
                    .send()
                    .await
                    .expect("answered");
                let status = response.status().as_u16();
                let body: Value = response.json().await.unwrap_or(Value::Null);
                (status, body)
            }
        });
        let sampling = async {
            let started = Instant::now();
            while started.elapsed() < Duration::from_millis(800) {
                peak = peak.max(rss_mib(dev.pid()));
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        };
        let (answers, ()) = tokio::join!(futures::future::join_all(requests), sampling);
        for (index, (status, body)) in answers.into_iter().enumerate() {
            // The values are resolved when the resource is created (as in
            // Heat), so the stack is accepted and its create fails.
            assert_eq!(status, 201, "{body}");
            let url = format!("{gateway}/orchestration/v1/demo/stacks/bomb-{round}-{index}");
            let deadline = Instant::now() + Duration::from_secs(20);
            let stack = loop {
                let stack: Value = http
                    .get(&url)
                    .header("X-Auth-Token", &token)
                    .send()
                    .await
                    .expect("answered")
                    .json()
                    .await
                    .expect("json");
                if stack["stack"]["stack_status"] != "CREATE_IN_PROGRESS" {
                    break stack;
                }
                assert!(Instant::now() < deadline, "still in progress: {stack}");
                peak = peak.max(rss_mib(dev.pid()));
                tokio::time::sleep(Duration::from_millis(20)).await;
            };
            assert_eq!(stack["stack"]["stack_status"], "CREATE_FAILED", "{stack}");
            let reason = stack["stack"]["stack_status_reason"]
                .as_str()
                .unwrap_or_default();
            assert!(reason.contains("bytes of generated values"), "{reason}");
        }
    }
    // Freed memory goes back to the system (give the allocator a moment).
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut after = rss_mib(dev.pid());
    while after > before + 24.0 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(100)).await;
        after = rss_mib(dev.pid());
    }
    eprintln!("RSS before {before:.1} MiB, peak {peak:.1} MiB, after {after:.1} MiB");
    assert!(
        peak - before < 192.0,
        "twelve bombs, four at a time, peaked {:.1} MiB above the start",
        peak - before
    );
    assert!(
        after - before < 32.0,
        "RSS stayed {:.1} MiB above where it started",
        after - before
    );
}
