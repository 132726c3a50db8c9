//! `ember quota show|set` against a real `ember dev`: a member reads its
//! project's quotas, the dev admin sets and resets them, bad input is
//! refused by name, and a stack over the quota is refused naming it.

mod support;

use support::{Dev, fail, succeed};

#[test]
fn quotas_through_the_cli() {
    let data_dir = tempfile::tempdir().expect("data dir");
    let dir = data_dir.path();
    let _dev = Dev::start(dir);

    let shown = succeed(&["quota", "show"], dir);
    assert!(shown.contains("project demo"), "{shown}");
    assert!(
        shown.lines().any(|line| line.starts_with("stacks")
            && line.contains("512")
            && line.contains("default")),
        "{shown}"
    );

    // Scripts read it as JSON: a per-project limit has its use, a
    // per-object one null.
    let rows: serde_json::Value =
        serde_json::from_str(&succeed(&["quota", "show", "-f", "json"], dir)).expect("json");
    let row = |name: &str| {
        rows.as_array()
            .and_then(|rows| rows.iter().find(|row| row["quota"] == name))
            .cloned()
            .unwrap_or_else(|| panic!("{name} in {rows}"))
    };
    assert_eq!(
        row("stacks"),
        serde_json::json!({"quota": "stacks", "limit": 512, "used": 0, "source": "default"})
    );
    assert_eq!(
        row("nested_depth")["used"],
        serde_json::Value::Null,
        "{rows}"
    );
    assert_eq!(
        succeed(
            &["quota", "show", "-f", "value", "-c", "limit", "-c", "quota"],
            dir
        )
        .lines()
        .next(),
        Some("512 stacks")
    );

    let set = succeed(
        &[
            "quota",
            "set",
            "demo",
            "--limit",
            "stacks=1",
            "--limit",
            "clusters=2",
        ],
        dir,
    );
    assert!(
        set.lines().any(|line| line.starts_with("stacks")
            && line.contains(" 1 ")
            && line.contains("set for the project")),
        "{set}"
    );
    let refused = fail(&["quota", "set", "demo", "--limit", "stacks"], dir);
    assert!(refused.contains("NAME=LIMIT"), "{refused}");
    let refused = fail(&["quota", "set", "demo", "--limit", "planets=3"], dir);
    assert!(
        refused.contains("quota \"planets\" does not exist"),
        "{refused}"
    );

    std::fs::write(
        dir.join("one.yaml"),
        "heat_template_version: 2021-04-16\nresources:\n  a: {type: OS::Heat::None}\n",
    )
    .expect("template");
    let template = dir.join("one.yaml").display().to_string();
    succeed(
        &["stack", "create", "first", "-t", &template, "--wait"],
        dir,
    );
    let refused = fail(&["stack", "create", "second", "-t", &template], dir);
    assert!(
        refused.contains("quota exceeded") && refused.contains("(quota stacks)"),
        "{refused}"
    );

    let reset = succeed(&["quota", "set", "demo", "--reset", "stacks"], dir);
    assert!(
        reset.lines().any(|line| line.starts_with("stacks")
            && line.contains("512")
            && line.contains("default")),
        "{reset}"
    );
    succeed(
        &["stack", "create", "second", "-t", &template, "--wait"],
        dir,
    );
}
