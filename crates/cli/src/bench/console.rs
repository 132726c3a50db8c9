//! `ember bench console`: how fast the web console shows a project's work,
//! in a headless Chromium (Debian's, through chromedriver) against an
//! in-process Ember, and what the console costs the API when no one uses
//! it.
//!
//! - the stacks list with `--stacks` stacks (1,000): first contentful
//!   paint, and when the last row is in the table;
//! - a stack's page with `--resources` resources (500) in a tree (each
//!   depends on another): when every node of the topology is drawn;
//! - GET one stack through a gateway with the console and through one
//!   without it, alternating, median and p99.
//!
//! Times are the page's own clock (`performance.now()`, from the start of
//! the navigation), read by polling the page every few milliseconds, so
//! each is late by at most one poll.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::stacks::client::RestStacks;
use super::summarize;
use crate::browser::Browser;
use crate::dev::{DevCredentials, RunningEmber};

pub struct ConsoleBench {
    pub stacks: usize,
    pub resources: usize,
    pub runs: usize,
    pub calls: usize,
}

/// How often the page is asked whether it is done.
const POLL: Duration = Duration::from_millis(5);
/// The longest a page may take before the run gives up.
const LIMIT: Duration = Duration::from_secs(60);

pub async fn run(settings: ConsoleBench) -> Result<(), String> {
    let data_dir = tempfile::tempdir().map_err(|error| error.to_string())?;
    let (mut config, secrets) = crate::dev::ephemeral_config(data_dir.path());
    // One project holds them all.
    config.engine.quotas.stacks = config.engine.quotas.stacks.max(settings.stacks as u64 + 1);
    let running = RunningEmber::start(config.clone(), secrets.clone()).await?;
    let passwords = crate::dev::seed_dev_identity(&config, &secrets, running.gateway_addr)
        .await?
        .ok_or("the built-in identity is off")?;
    let credentials =
        DevCredentials::mint(running.gateway_addr, &secrets, Duration::from_secs(3600))?;
    let base = format!("http://{}", running.gateway_addr);
    let stacks = RestStacks::new(running.gateway_addr, &credentials.member.token);

    println!(
        "console: making {} stacks and one of {} resources…",
        settings.stacks, settings.resources
    );
    let (big, _) = stacks
        .create_and_wait("big", &tree(settings.resources).to_string())
        .await?;
    let small = json!({"heat_template_version": "2021-04-16",
        "resources": {"n": {"type": "OS::Heat::None"}}})
    .to_string();
    let names: Vec<String> = (1..settings.stacks)
        .map(|index| format!("stack-{index:05}"))
        .collect();
    for chunk in names.chunks(16) {
        let creates = chunk
            .iter()
            .map(|name| stacks.create_and_wait(name, &small));
        for created in futures::future::join_all(creates).await {
            created?;
        }
    }

    let browser = Browser::start(1280, 800).await?;
    sign_in(&browser, &base, &passwords.demo).await?;
    let list = format!("{base}/console/#/stacks");
    let page = format!("{base}/console/#/stacks/big/{}", big.id());
    let rows = format!(
        "return document.querySelectorAll('tr[data-stack]').length >= {}",
        settings.stacks
    );
    let nodes = format!(
        "return document.querySelectorAll('svg#topology g.node').length >= {}",
        settings.resources
    );
    let (mut list_paint, mut list_done, mut page_done) = (Vec::new(), Vec::new(), Vec::new());
    for run in 0..=settings.runs {
        let (paint, done) = load(&browser, &list, &rows).await?;
        let (_, drawn) = load(&browser, &page, &nodes).await?;
        // The first round warms the browser's caches and is not counted.
        if run > 0 {
            list_paint.push(paint);
            list_done.push(done);
            page_done.push(drawn);
        }
    }
    let errors = browser.console_errors().await?;
    drop(browser);

    let median_ms = |samples: &mut Vec<Duration>| summarize(samples).median_us / 1000.0;
    let p90_ms = |samples: &mut Vec<Duration>| summarize(samples).p90_us / 1000.0;
    println!();
    println!(
        "| headless Chromium, {} runs | median | p90 |",
        settings.runs
    );
    println!("|---|---|---|");
    println!(
        "| stacks list: first contentful paint | {:.0} ms | {:.0} ms |",
        median_ms(&mut list_paint),
        p90_ms(&mut list_paint)
    );
    println!(
        "| stacks list: all {} rows shown | {:.0} ms | {:.0} ms |",
        settings.stacks,
        median_ms(&mut list_done),
        p90_ms(&mut list_done)
    );
    println!(
        "| stack page: topology of {} resources drawn | {:.0} ms | {:.0} ms |",
        settings.resources,
        median_ms(&mut page_done),
        p90_ms(&mut page_done)
    );
    if !errors.is_empty() {
        println!("the browser logged errors: {errors:#?}");
    }

    api_cost(&settings, &stacks, &stacks.stack_url(&big), data_dir.path()).await?;
    running.shutdown.cancel();
    Ok(())
}

/// `resources` resources of `OS::Heat::None`, each but the first depending
/// on the one at half its index: a tree as wide as it is deep.
fn tree(resources: usize) -> Value {
    let mut map = serde_json::Map::new();
    for index in 0..resources {
        let mut resource = json!({"type": "OS::Heat::None"});
        if index > 0 {
            resource["depends_on"] = json!([format!("r{}", (index - 1) / 2)]);
        }
        map.insert(format!("r{index}"), resource);
    }
    json!({"heat_template_version": "2021-04-16", "resources": map})
}

async fn sign_in(browser: &Browser, base: &str, password: &str) -> Result<(), String> {
    browser.goto(&format!("{base}/console/")).await?;
    for (field, text) in [
        ("#signin-user", "demo"),
        ("#signin-password", password),
        ("#signin-project", "demo"),
    ] {
        let element = browser.wait_for(field, LIMIT).await?;
        browser
            .execute(
                "document.querySelector(arguments[0]).value = '';",
                json!([field]),
            )
            .await?;
        browser.type_into(&element, text).await?;
    }
    let submit = browser.wait_for("#signin-submit", LIMIT).await?;
    browser.click(&submit).await?;
    browser
        .wait_until(
            "signed in",
            "return !!document.querySelector('#whoami');",
            LIMIT,
            POLL,
        )
        .await
        .map(drop)
}

/// Loads `url` as a new document and waits until `done` (a script) is
/// true: the first contentful paint and the moment it was seen done, on
/// the page's clock.
async fn load(browser: &Browser, url: &str, done: &str) -> Result<(Duration, Duration), String> {
    browser.goto("about:blank").await?;
    browser.goto(url).await?;
    // The moment it is first seen done is kept in the page, for the paint
    // entry may be recorded a frame later.
    let script = format!(
        "if (window.emberBenchDone === undefined && (function () {{ {done} }})()) \
           window.emberBenchDone = performance.now(); \
         const paint = performance.getEntriesByName('first-contentful-paint')[0]; \
         if (window.emberBenchDone === undefined || !paint) return null; \
         return [paint.startTime, window.emberBenchDone];"
    );
    let times = browser.wait_until(url, &script, LIMIT, POLL).await?;
    let at = |index: usize| {
        Duration::from_secs_f64(times[index].as_f64().unwrap_or(0.0).max(0.0) / 1000.0)
    };
    Ok((at(0), at(1)))
}

/// GET one stack (`stack_url`, through `stacks`' gateway: the console on)
/// and the same stack through a second Ember whose gateway has it off,
/// alternating rounds.
async fn api_cost(
    settings: &ConsoleBench,
    stacks: &RestStacks,
    stack_url: &str,
    data_dir: &std::path::Path,
) -> Result<(), String> {
    let other_dir = data_dir.join("without-console");
    std::fs::create_dir_all(&other_dir).map_err(|error| error.to_string())?;
    let (mut config, secrets) = crate::dev::ephemeral_config(&other_dir);
    config.gateway.console = false;
    let without = RunningEmber::start(config, secrets.clone()).await?;
    let other_token =
        DevCredentials::mint(without.gateway_addr, &secrets, Duration::from_secs(3600))?
            .member
            .token;
    let others = RestStacks::new(without.gateway_addr, &other_token);
    let (other, _) = others
        .create_and_wait("big", &tree(settings.resources).to_string())
        .await?;
    let other_url = others.stack_url(&other);
    let (mut on, mut off) = (Vec::new(), Vec::new());
    let round = (settings.calls / 10).max(1);
    for _ in 0..10 {
        time_gets(stacks, stack_url, round, &mut on).await?;
        time_gets(&others, &other_url, round, &mut off).await?;
    }
    let count = on.len();
    let (on, off) = (summarize(&mut on), summarize(&mut off));
    println!();
    println!(
        "GET one stack, {} calls each, alternating: console on p50 {:.3} ms p99 {:.3} ms; off p50 {:.3} ms p99 {:.3} ms",
        count,
        on.median_us / 1000.0,
        on.p99_us / 1000.0,
        off.median_us / 1000.0,
        off.p99_us / 1000.0
    );
    without.shutdown.cancel();
    Ok(())
}

/// `calls` GETs of `url`, each timed into `samples`.
async fn time_gets(
    stacks: &RestStacks,
    url: &str,
    calls: usize,
    samples: &mut Vec<Duration>,
) -> Result<(), String> {
    for _ in 0..calls {
        let started = Instant::now();
        stacks.get_ok(url).await?;
        samples.push(started.elapsed());
    }
    Ok(())
}
