//! The web console in a real browser (headless Chromium through WebDriver)
//! against a real `ember dev`: signing in, a stack created from a file
//! with its graph drawn, a lock and the reasons it disables actions, a
//! resource marked unhealthy and replaced by the next update, an
//! instance locked and unlocked, a cluster's scale-in held by a lifecycle hook
//! and completed from the page, a phone-width screen, and another project's
//! user who sees none of it. Screenshots of each page are kept under
//! `target/console-screenshots/`.

mod support;

use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};
use support::browser::Browser;
use support::{Dev, hooked_cluster_commands, succeed};

const WAIT: Duration = Duration::from_secs(30);

/// Four resources, two dependencies: `server` reads `secret`, `note`
/// depends on `server`; `inner` is a nested stack of one `leaf`.
const TEMPLATE: &str = "heat_template_version: 2021-04-16
parameters:
  length: {type: number, default: 16}
resources:
  secret:
    type: OS::Heat::RandomString
    properties: {length: {get_param: length}}
  server:
    type: OS::Nova::Server
    properties:
      flavor: m1.small
      image: debian-12
      metadata: {secret: {get_attr: [secret, value]}}
  note:
    type: OS::Heat::None
    depends_on: [server]
  inner:
    type: OS::Heat::Stack
    properties:
      template: |
        heat_template_version: 2021-04-16
        resources:
          leaf: {type: OS::Heat::None}
outputs:
  server:
    value: {get_resource: server}
";

/// The password `ember dev` gave `user` (its clouds.yaml).
fn password_of(dir: &Path, user: &str) -> String {
    let clouds = std::fs::read_to_string(dir.join("clouds.yaml")).expect("clouds.yaml");
    let mut lines = clouds
        .lines()
        .skip_while(|line| line.trim() != format!("username: {user}"));
    let line = lines
        .find(|line| line.trim().starts_with("password:"))
        .expect("a password line");
    line.trim()
        .trim_start_matches("password:")
        .trim()
        .trim_matches('"')
        .to_owned()
}

async fn sign_in(browser: &Browser, url: &str, user: &str, password: &str, project: &str) {
    browser.goto(&format!("{url}/console/")).await;
    let field = browser.wait_for("#signin-user", WAIT).await;
    browser.type_into(&field, user).await;
    let field = browser.wait_for("#signin-password", WAIT).await;
    browser.type_into(&field, password).await;
    let field = browser.wait_for("#signin-project", WAIT).await;
    // A remembered project name is replaced.
    browser
        .execute(
            "document.querySelector('#signin-project').value = '';",
            json!([]),
        )
        .await;
    browser.type_into(&field, project).await;
    let submit = browser.wait_for("#signin-submit", WAIT).await;
    browser.click(&submit).await;
    browser
        .wait_until(
            "signed in",
            &format!(
                "const who = document.querySelector('#whoami'); \
                 return who && who.textContent.includes('{user}') && who.textContent.includes('{project}');"
            ),
            WAIT,
        )
        .await;
}

/// The text of the first element matching `css`, or "" when there is none.
async fn text_of(browser: &Browser, css: &str) -> String {
    let script = format!(
        "const e = document.querySelector({}); return e ? e.textContent : '';",
        json!(css)
    );
    browser
        .execute(&script, json!([]))
        .await
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

async fn count(browser: &Browser, css: &str) -> usize {
    browser.find_all(css).await.len()
}

async fn click(browser: &Browser, css: &str) {
    let element = browser.wait_for(css, WAIT).await;
    browser.click(&element).await;
}

/// Clicks `css` once it is there and enabled (the pages disable an action
/// until its "allowed?" answer says it may run).
async fn click_enabled(browser: &Browser, css: &str) {
    let script = format!(
        "const e = document.querySelector({}); return !!e && !e.disabled;",
        json!(css)
    );
    browser
        .wait_until(&format!("{css} enabled"), &script, WAIT)
        .await;
    click(browser, css).await;
}

async fn type_text(browser: &Browser, css: &str, text: &str) {
    let element = browser.wait_for(css, WAIT).await;
    browser.type_into(&element, text).await;
}

/// Waits until the text of `css` contains `wanted`.
async fn wait_text(browser: &Browser, css: &str, wanted: &str) {
    let script = format!(
        "const e = document.querySelector({}); return !!e && e.textContent.includes({});",
        json!(css),
        json!(wanted)
    );
    browser
        .wait_until(&format!("{css} shows {wanted:?}"), &script, WAIT)
        .await;
}

async fn api(dev: &Dev, token: &str, path: &str) -> Value {
    reqwest::Client::new()
        .get(format!("{}{path}", dev.url))
        .header("x-auth-token", token)
        .send()
        .await
        .expect("the gateway answers")
        .json()
        .await
        .expect("JSON")
}

/// The token `ember dev` minted for `who` (`member` or `admin`).
fn dev_token(dir: &Path, who: &str) -> String {
    let credentials: Value = serde_json::from_str(
        &std::fs::read_to_string(dir.join("dev-credentials.json")).expect("credentials"),
    )
    .expect("JSON");
    credentials[who]["token"]
        .as_str()
        .expect("a token")
        .to_owned()
}

fn member_token(dir: &Path) -> String {
    dev_token(dir, "member")
}

fn admin_token(dir: &Path) -> String {
    dev_token(dir, "admin")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_console_shows_and_drives_stacks_and_clusters_and_keeps_projects_apart() {
    let data_dir = tempfile::tempdir().expect("tempdir");
    let dir = data_dir.path();
    let dev = Dev::start(dir);
    let Some(browser) = Browser::start(1280, 800).await else {
        return;
    };
    let token = member_token(dir);
    let template = dir.join("app.yaml");
    std::fs::write(&template, TEMPLATE).expect("template written");

    // Signing in with a wrong password says so, with the API's words.
    browser.goto(&format!("{}/console/", dev.url)).await;
    type_text(&browser, "#signin-user", "demo").await;
    type_text(&browser, "#signin-password", "not-the-password").await;
    click(&browser, "#signin-submit").await;
    browser
        .wait_until(
            "the sign-in refusal shown",
            "const e = document.querySelector('#signin-error'); \
             return !!e && e.textContent.trim().length > 0;",
            WAIT,
        )
        .await;
    // Chromium itself logs the refused request (a 401) as an error; what
    // the pages log is checked from here on.
    browser.console_errors().await;

    sign_in(
        &browser,
        &dev.url,
        "demo",
        &password_of(dir, "demo"),
        "demo",
    )
    .await;
    browser.screenshot("stacks-empty").await;
    let admin_shown = browser
        .execute(
            "const a = document.querySelector('a[href=\"#/admin\"]'); \
             return !!a && !a.closest('[hidden]');",
            json!([]),
        )
        .await;
    assert_eq!(admin_shown, json!(false), "a member is shown no admin page");

    // A stack from a template file, followed to CREATE_COMPLETE.
    click(&browser, "#create-stack").await;
    type_text(&browser, "#new-stack-name", "app").await;
    type_text(&browser, "#new-stack-file", &template.display().to_string()).await;
    type_text(&browser, "#new-stack-params", "length=20").await;
    click(&browser, "#new-stack-submit").await;
    wait_text(&browser, "#stack-status", "CREATE_COMPLETE").await;

    // Its graph: a node per resource and an edge per dependency, as the
    // API lists them.
    let stacks = api(&dev, &token, "/orchestration/v1/demo/stacks").await;
    let id = stacks["stacks"][0]["id"]
        .as_str()
        .expect("a stack id")
        .to_owned();
    let resources = api(
        &dev,
        &token,
        &format!("/orchestration/v1/demo/stacks/app/{id}/resources"),
    )
    .await;
    let resources = resources["resources"]
        .as_array()
        .expect("resources")
        .clone();
    let dependencies: usize = resources
        .iter()
        .map(|resource| resource["required_by"].as_array().map_or(0, Vec::len))
        .sum();
    assert_eq!((resources.len(), dependencies), (4, 2));
    browser
        .wait_until(
            "the graph is drawn",
            "return document.querySelectorAll('svg#topology g.node').length === 4;",
            WAIT,
        )
        .await;
    assert_eq!(count(&browser, "svg#topology .edge").await, dependencies);
    for name in ["secret", "server", "note", "inner"] {
        assert_eq!(
            count(
                &browser,
                &format!("svg#topology g.node[data-resource=\"{name}\"]")
            )
            .await,
            1,
            "no node for {name}"
        );
    }
    // The nested stack opens in place, and closes again.
    click(
        &browser,
        "svg#topology g.expand-nested[data-resource=\"inner\"]",
    )
    .await;
    browser
        .wait_for("svg#topology g.node[data-resource=\"inner/leaf\"]", WAIT)
        .await;
    assert_eq!(count(&browser, "svg#topology .edge").await, dependencies);
    browser.screenshot("stack").await;
    click(
        &browser,
        "svg#topology g.expand-nested[data-resource=\"inner\"]",
    )
    .await;
    browser
        .wait_until(
            "the nested stack folded",
            "return document.querySelectorAll('svg#topology g.node').length === 4;",
            WAIT,
        )
        .await;

    // A lock: its banner, and delete disabled saying why; unlock undoes it.
    click_enabled(&browser, "#action-lock").await;
    type_text(&browser, "#lock-reason", "kernel upgrade").await;
    click_enabled(&browser, "#lock-submit").await;
    wait_text(&browser, "#lock-banner", "kernel upgrade").await;
    browser
        .wait_until(
            "delete disabled with its reason",
            "const b = document.querySelector('#action-delete'); \
             return !!b && b.disabled && (b.title || '').toLowerCase().includes('lock');",
            WAIT,
        )
        .await;
    browser.screenshot("stack-locked").await;
    wait_text(&browser, "#stack-status", "LOCK_COMPLETE").await;
    click_enabled(&browser, "#action-unlock").await;
    browser
        .wait_until(
            "unlocked",
            "const b = document.querySelector('#action-delete'); \
             return !document.querySelector('#lock-banner') && !!b && !b.disabled;",
            WAIT,
        )
        .await;

    // A resource marked unhealthy from its node.
    click(&browser, "svg#topology g.node[data-resource=\"server\"]").await;
    click_enabled(&browser, "#mark-unhealthy").await;
    let server = format!("/orchestration/v1/demo/stacks/app/{id}/resources/server");
    let mut marked = Value::Null;
    for _ in 0..100 {
        marked = api(&dev, &token, &server).await;
        if marked["resource"]["resource_status"] == "CHECK_FAILED" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(
        marked["resource"]["resource_status"], "CHECK_FAILED",
        "{marked}"
    );
    wait_text(
        &browser,
        "#resources tr[data-resource=\"server\"]",
        "CHECK_FAILED",
    )
    .await;

    // The next update from the page replaces it.
    click_enabled(&browser, "#action-update").await;
    click_enabled(&browser, "#update-submit").await;
    wait_text(&browser, "#stack-status", "UPDATE_COMPLETE").await;
    let replaced = api(&dev, &token, &server).await;
    assert_eq!(
        replaced["resource"]["resource_status"], "CREATE_COMPLETE",
        "{replaced}"
    );
    assert_ne!(
        replaced["resource"]["physical_resource_id"], marked["resource"]["physical_resource_id"],
        "the marked server was replaced"
    );

    // A cluster whose scale-in waits for its lifecycle hook, completed
    // from the page.
    for command in hooked_cluster_commands(dir, 2, 300) {
        let command: Vec<&str> = command.iter().map(String::as_str).collect();
        succeed(&command, dir);
    }
    browser
        .goto(&format!("{}/console/#/clusters", dev.url))
        .await;
    click(&browser, "tr[data-cluster=\"web\"] a").await;
    browser
        .wait_until(
            "two nodes",
            "return document.querySelectorAll('#nodes tr[data-node]').length === 2;",
            WAIT,
        )
        .await;
    click_enabled(&browser, "#scale-in").await;
    browser
        .wait_for("#lifecycle tr[data-lifecycle]", WAIT)
        .await;
    // The countdown runs to the lifecycle-hook service's own deadline.
    let cluster = api(&dev, &token, "/clustering/v1/clusters/web").await;
    let cluster_id = cluster["cluster"]["id"]
        .as_str()
        .expect("a cluster id")
        .to_owned();
    let waits = api(
        &dev,
        &token,
        &format!("/clustering/v1/clusters/{cluster_id}/lifecycle-actions"),
    )
    .await;
    let deadline = waits["lifecycle_actions"][0]["deadline"].clone();
    assert!(deadline.is_string(), "{waits}");
    browser
        .wait_until(
            "the countdown's deadline is the service's",
            &format!(
                "const e = document.querySelector('#lifecycle .countdown'); \
                 return !!e && e.dataset.estimated === 'false' \
                   && new Date(e.dataset.deadline).getTime() === new Date({deadline}).getTime();"
            ),
            WAIT,
        )
        .await;
    let countdown = text_of(&browser, "#lifecycle .countdown").await;
    assert!(countdown.contains("left"), "no countdown: {countdown:?}");
    browser
        .wait_until(
            "the deadline counts down",
            &format!(
                "const e = document.querySelector('#lifecycle .countdown'); \
                 return !!e && e.textContent !== {};",
                json!(countdown)
            ),
            Duration::from_secs(3),
        )
        .await;
    browser.screenshot("cluster-hook").await;
    click_enabled(&browser, "#lifecycle button.complete-continue").await;
    browser
        .wait_until(
            "one node left",
            "return document.querySelectorAll('#nodes tr[data-node]').length === 1 \
             && document.querySelectorAll('#lifecycle tr[data-lifecycle]').length === 0;",
            WAIT,
        )
        .await;
    browser.screenshot("cluster").await;

    // An instance: locked from its page (its power actions then say why
    // not), and unlocked.
    succeed(
        &[
            "instance",
            "create",
            "box",
            "--flavor",
            "m1.small",
            "--image",
            "debian-12",
            "--wait",
        ],
        dir,
    );
    browser
        .goto(&format!("{}/console/#/instances", dev.url))
        .await;
    click(&browser, "tr[data-instance=\"box\"] a").await;
    wait_text(&browser, "#instance-status", "ACTIVE").await;
    click_enabled(&browser, "#action-lock").await;
    type_text(&browser, "#lock-reason", "disk swap").await;
    click_enabled(&browser, "#lock-submit").await;
    wait_text(&browser, "#lock-banner", "disk swap").await;
    browser
        .wait_until(
            "power off disabled with its reason",
            "const b = document.querySelector('#power-off'); \
             return !!b && b.disabled && (b.title || '').toLowerCase().includes('lock');",
            WAIT,
        )
        .await;
    browser.screenshot("instance-locked").await;
    click_enabled(&browser, "#action-unlock").await;
    browser
        .wait_until(
            "the instance unlocked",
            "const b = document.querySelector('#power-off'); \
             return !document.querySelector('#lock-banner') && !!b && !b.disabled;",
            WAIT,
        )
        .await;

    // A phone-width screen: nothing wider than the window.
    browser.resize(390, 844).await;
    browser
        .goto(&format!("{}/console/#/stacks/app/{id}", dev.url))
        .await;
    wait_text(&browser, "#stack-status", "COMPLETE").await;
    let overflow = browser
        .execute(
            "return document.documentElement.scrollWidth - window.innerWidth;",
            json!([]),
        )
        .await;
    assert!(
        overflow.as_i64().unwrap_or(i64::MAX) <= 1,
        "wider than a phone: {overflow}"
    );
    browser.screenshot("stack-phone").await;
    browser.resize(1280, 800).await;

    let errors = browser.console_errors().await;
    assert!(errors.is_empty(), "the browser logged errors: {errors:#?}");

    // An admin's page: the plug-ins with their circuits, quotas, the audit
    // trail (the lock and unlock above are in it).
    succeed(
        &[
            "plugin",
            "register",
            "flaky",
            "--endpoint",
            "http://127.0.0.1:9",
            "--failure-mode",
            "warn",
            "--disabled",
        ],
        dir,
    );
    click(&browser, "#signout").await;
    sign_in(
        &browser,
        &dev.url,
        "admin",
        &password_of(dir, "admin"),
        "demo",
    )
    .await;
    click(&browser, "a[href=\"#/admin\"]").await;
    browser
        .wait_for("#plugins tr[data-plugin=\"flaky\"]", WAIT)
        .await;
    click(
        &browser,
        "#plugins tr[data-plugin=\"flaky\"] button.plugin-enable",
    )
    .await;
    wait_text(
        &browser,
        "#plugins tr[data-plugin=\"flaky\"] .plugin-enabled",
        "enabled",
    )
    .await;
    let shown = api(
        &dev,
        &admin_token(dir),
        "/orchestration/v1/demo/plugins/flaky",
    )
    .await;
    assert_eq!(
        shown["plugin"]["enabled"], true,
        "the page's switch enabled it: {shown}"
    );
    succeed(&["plugin", "remove", "flaky"], dir);
    browser
        .wait_for("#quotas tr[data-limit=\"stacks\"]", WAIT)
        .await;
    browser
        .wait_until(
            "the audit trail shows the lock",
            "return Array.from(document.querySelectorAll('#audit tr[data-audit]'))\
               .some((row) => row.textContent.includes('kernel upgrade'));",
            WAIT,
        )
        .await;
    browser.screenshot("admin").await;

    // Another project's user sees none of it, by list or by address.
    succeed(&["identity", "project", "create", "other"], dir);
    succeed(
        &[
            "identity",
            "user",
            "create",
            "bob",
            "--password",
            "bob-password-1",
            "--project",
            "other",
        ],
        dir,
    );
    succeed(&["identity", "role", "add", "bob", "other", "member"], dir);
    // Bob signs in with the keyboard alone: the form is reachable by Tab
    // and sent by Enter.
    click(&browser, "#signout").await;
    browser.wait_for("#signin-user", WAIT).await;
    browser
        .execute(
            "for (const id of ['signin-user', 'signin-password', 'signin-project']) \
               document.getElementById(id).value = ''; \
             document.getElementById('signin-user').focus();",
            json!([]),
        )
        .await;
    let (tab, enter) = (ember::browser::TAB, ember::browser::ENTER);
    browser
        .keys(&format!("bob{tab}bob-password-1{tab}other{enter}"))
        .await;
    wait_text(&browser, "#whoami", "other").await;
    browser.goto(&format!("{}/console/#/stacks", dev.url)).await;
    // Each list says it is empty once it has been read.
    wait_text(&browser, "#stacks", "No stacks yet").await;
    assert_eq!(count(&browser, "tr[data-stack]").await, 0);
    browser
        .goto(&format!("{}/console/#/clusters", dev.url))
        .await;
    wait_text(&browser, "#clusters", "No clusters yet").await;
    assert_eq!(count(&browser, "tr[data-cluster]").await, 0);
    browser
        .goto(&format!("{}/console/#/stacks/app/{id}", dev.url))
        .await;
    browser.wait_for(".error", WAIT).await;
    assert_eq!(count(&browser, "svg#topology g.node").await, 0);
    browser.screenshot("other-project").await;
}
