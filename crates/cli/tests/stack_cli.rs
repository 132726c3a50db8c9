//! `ember stack …` as an operator runs it, against a real `ember dev`:
//! create from template files (with `get_file` sent along) and watch it
//! with `--wait`, inspect it, change it, delete it; a failing stack makes
//! `--wait` exit non-zero with the reason.

use std::path::Path;

mod support;

use support::{Dev, ember, succeed, text};

const TEMPLATE: &str = "\
heat_template_version: 2018-08-31
description: cli stack
parameters:
  greeting:
    type: string
resources:
  slow:
    type: OS::Heat::TestResource
    properties:
      value: {get_param: greeting}
      action_wait_secs: {create: 0.3, update: 0.1}
  script:
    type: OS::Heat::Value
    properties:
      value: {get_file: files/script.sh}
  random:
    type: OS::Heat::RandomString
    properties:
      length: 6
outputs:
  greeting:
    description: what slow stores
    value: {get_attr: [slow, output]}
  script:
    value: {get_attr: [script, value]}
";

/// Writes the template and the file it reads into `dir`.
fn write_templates(dir: &Path) -> String {
    std::fs::create_dir_all(dir.join("templates/files")).expect("dirs");
    std::fs::write(dir.join("templates/files/script.sh"), "echo hello\n").expect("script");
    let template = dir.join("templates/stack.yaml");
    std::fs::write(&template, TEMPLATE).expect("template");
    std::fs::write(
        dir.join("templates/failing.yaml"),
        "heat_template_version: 2018-08-31\nresources:\n  broken:\n    type: OS::Heat::TestResource\n    properties:\n      fail: true\n",
    )
    .expect("failing template");
    template.display().to_string()
}

/// The line index of the first line containing `needle`.
fn line_of(output: &str, needle: &str) -> usize {
    output
        .lines()
        .position(|line| line.contains(needle))
        .unwrap_or_else(|| panic!("{needle:?} not in:\n{output}"))
}

#[test]
fn a_stack_is_created_with_live_progress_inspected_and_deleted() {
    let data_dir = tempfile::tempdir().expect("tempdir");
    let dir = data_dir.path();
    let template = write_templates(dir);
    let _dev = Dev::start(dir);

    let created = succeed(
        &[
            "stack",
            "create",
            "cli",
            "-t",
            &template,
            "-P",
            "greeting=hi there",
            "--tag",
            "a",
            "--wait",
        ],
        dir,
    );
    // Progress as it happens, in order, then the final status.
    let started = line_of(&created, "[slow]: CREATE_IN_PROGRESS");
    let finished = line_of(&created, "[slow]: CREATE_COMPLETE");
    assert!(started < finished, "{created}");
    assert!(created.contains("[script]: CREATE_COMPLETE"), "{created}");
    assert_eq!(
        created.lines().last(),
        Some("stack cli CREATE_COMPLETE"),
        "{created}"
    );

    let listed = succeed(&["stack", "list"], dir);
    assert!(
        listed.contains("cli") && listed.contains("CREATE_COMPLETE"),
        "{listed}"
    );
    let shown = succeed(&["stack", "show", "cli"], dir);
    assert!(shown.contains("greeting=hi there"), "{shown}");
    assert!(shown.contains("script=echo hello"), "{shown}");

    assert_eq!(
        succeed(&["stack", "outputs", "cli", "greeting"], dir),
        "hi there\n"
    );
    assert_eq!(
        succeed(&["stack", "outputs", "cli", "script"], dir),
        "echo hello\n\n",
        "get_file's content came from the file next to the template"
    );
    let outputs = succeed(&["stack", "outputs", "cli"], dir);
    assert!(outputs.contains("what slow stores"), "{outputs}");

    let resources = succeed(&["stack", "resources", "cli"], dir);
    for name in ["slow", "script", "random"] {
        assert!(resources.contains(name), "{resources}");
    }
    assert!(resources.contains("OS::Heat::TestResource"), "{resources}");
    let events = succeed(&["stack", "events", "cli", "--resource", "slow"], dir);
    assert_eq!(events.lines().count(), 2, "{events}");
    let template_shown = succeed(&["stack", "template", "cli"], dir);
    assert!(
        template_shown.contains("heat_template_version"),
        "{template_shown}"
    );
    assert!(
        template_shown.contains("file://"),
        "get_file points at the sent file: {template_shown}"
    );

    let validated = succeed(&["stack", "validate", "-t", &template], dir);
    assert!(
        validated.contains("\"Description\": \"cli stack\""),
        "{validated}"
    );

    let deleted = succeed(&["stack", "delete", "cli", "--wait"], dir);
    assert!(deleted.contains("DELETE_IN_PROGRESS"), "{deleted}");
    assert_eq!(
        deleted.lines().last(),
        Some("stack cli deleted"),
        "{deleted}"
    );
    let listed = succeed(&["stack", "list"], dir);
    assert!(!listed.contains("cli"), "{listed}");
    let missing = ember(&["stack", "show", "cli"], dir);
    assert!(!missing.status.success());
    assert!(
        String::from_utf8_lossy(&missing.stderr).contains("not found"),
        "{}",
        text(&missing)
    );
}

#[test]
fn a_failing_stack_makes_wait_exit_non_zero_with_the_reason() {
    let data_dir = tempfile::tempdir().expect("tempdir");
    let dir = data_dir.path();
    write_templates(dir);
    let _dev = Dev::start(dir);
    let failing = dir.join("templates/failing.yaml").display().to_string();

    let output = ember(
        &["stack", "create", "doomed", "-t", &failing, "--wait"],
        dir,
    );
    assert!(!output.status.success(), "{}", text(&output));
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        stdout.contains("[broken]: CREATE_FAILED"),
        "{}",
        text(&output)
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("stack doomed CREATE_FAILED"),
        "{}",
        text(&output)
    );
    assert!(stderr.contains("Test Resource failed"), "{}", text(&output));

    let bad = ember(&["stack", "create", "typo", "-t", "absent.yaml"], dir);
    assert!(!bad.status.success());
    assert!(
        String::from_utf8_lossy(&bad.stderr).contains("absent.yaml"),
        "{}",
        text(&bad)
    );
    let no_template = ember(&["stack", "update", "doomed"], dir);
    assert!(
        String::from_utf8_lossy(&no_template.stderr).contains("--existing"),
        "{}",
        text(&no_template)
    );
}

#[test]
fn a_stack_is_updated_and_taken_through_actions_with_wait() {
    let data_dir = tempfile::tempdir().expect("tempdir");
    let dir = data_dir.path();
    let template = write_templates(dir);
    let _dev = Dev::start(dir);
    succeed(
        &[
            "stack",
            "create",
            "ops",
            "-t",
            &template,
            "-P",
            "greeting=one",
            "--wait",
        ],
        dir,
    );

    let updated = succeed(
        &[
            "stack",
            "update",
            "ops",
            "--existing",
            "-P",
            "greeting=two",
            "--wait",
        ],
        dir,
    );
    assert!(
        !updated.contains("CREATE_IN_PROGRESS"),
        "only the update's events are shown: {updated}"
    );
    assert!(updated.contains("[slow]: UPDATE_COMPLETE"), "{updated}");
    assert_eq!(
        updated.lines().last(),
        Some("stack ops UPDATE_COMPLETE"),
        "{updated}"
    );
    assert_eq!(
        succeed(&["stack", "outputs", "ops", "greeting"], dir),
        "two\n"
    );

    for (command, status) in [
        ("suspend", "SUSPEND_COMPLETE"),
        ("resume", "RESUME_COMPLETE"),
        ("check", "CHECK_COMPLETE"),
    ] {
        let output = succeed(&["stack", command, "ops", "--wait"], dir);
        assert_eq!(
            output.lines().last(),
            Some(format!("stack ops {status}").as_str()),
            "{output}"
        );
    }
}

#[test]
fn an_abandoned_stack_is_adopted_back_from_the_printed_data() {
    let data_dir = tempfile::tempdir().expect("tempdir");
    let dir = data_dir.path();
    let template = write_templates(dir);
    let _dev = Dev::start(dir);
    succeed(
        &[
            "stack",
            "create",
            "old",
            "-t",
            &template,
            "-P",
            "greeting=kept",
            "--wait",
        ],
        dir,
    );
    let script_before = succeed(&["stack", "outputs", "old", "greeting"], dir);

    let abandoned = succeed(&["stack", "abandon", "old"], dir);
    let data: serde_json::Value = serde_json::from_str(&abandoned).expect("abandon prints JSON");
    assert_eq!(data["name"], "old");
    let data_file = dir.join("old.json");
    std::fs::write(&data_file, &abandoned).expect("data file");
    assert!(!ember(&["stack", "show", "old"], dir).status.success());

    let adopted = succeed(
        &[
            "stack",
            "adopt",
            "new",
            "--data",
            &data_file.display().to_string(),
            "--wait",
        ],
        dir,
    );
    assert_eq!(
        adopted.lines().last(),
        Some("stack new ADOPT_COMPLETE"),
        "{adopted}"
    );
    assert_eq!(
        succeed(&["stack", "outputs", "new", "greeting"], dir),
        script_before
    );
}

#[test]
fn template_resources_and_environment_aliases_are_sent_from_their_directories() {
    let data_dir = tempfile::tempdir().expect("tempdir");
    let dir = data_dir.path();
    let templates = dir.join("family");
    std::fs::create_dir_all(templates.join("nested")).expect("dirs");
    let write = |name: &str, text: &str| std::fs::write(templates.join(name), text).expect(name);
    write(
        "parent.yaml",
        "heat_template_version: 2018-08-31\nresources:\n  child:\n    type: nested/child.yaml\n    properties:\n      greeting: hello\n  aliased:\n    type: My::Quiet\noutputs:\n  child_says:\n    value: {get_attr: [child, says]}\n",
    );
    write(
        "nested/child.yaml",
        "heat_template_version: 2018-08-31\nparameters:\n  greeting: {type: string}\nresources:\n  v:\n    type: OS::Heat::Value\n    properties:\n      value: {get_file: message.txt}\noutputs:\n  says:\n    value: {get_attr: [v, value]}\n",
    );
    // Same name as a file next to the parent: each reference is read
    // relative to the template that makes it.
    write("nested/message.txt", "from the nested directory");
    write("message.txt", "from the parent directory");
    write(
        "nested/quiet.yaml",
        "heat_template_version: 2018-08-31\nresources:\n  nothing:\n    type: OS::Heat::None\n",
    );
    write(
        "env.yaml",
        "resource_registry:\n  My::Quiet: nested/quiet.yaml\n",
    );
    let _dev = Dev::start(dir);

    let parent = templates.join("parent.yaml").display().to_string();
    let environment = templates.join("env.yaml").display().to_string();
    let created = succeed(
        &[
            "stack",
            "create",
            "family",
            "-t",
            &parent,
            "-e",
            &environment,
            "--wait",
        ],
        dir,
    );
    assert_eq!(
        created.lines().last(),
        Some("stack family CREATE_COMPLETE"),
        "{created}"
    );
    assert_eq!(
        succeed(&["stack", "outputs", "family", "child_says"], dir),
        "from the nested directory\n"
    );
    let resources = succeed(
        &["stack", "resources", "family", "--nested-depth", "1"],
        dir,
    );
    for name in ["child", "aliased", "v", "nothing"] {
        assert!(
            resources.lines().any(|line| line.starts_with(name)),
            "{name} in:\n{resources}"
        );
    }
}

#[test]
fn a_stack_is_locked_checked_and_unlocked_from_the_cli() {
    let data_dir = tempfile::tempdir().expect("tempdir");
    let dir = data_dir.path();
    let template = write_templates(dir);
    let _dev = Dev::start(dir);
    succeed(
        &[
            "stack",
            "create",
            "kept",
            "-t",
            &template,
            "-P",
            "greeting=hi",
            "--wait",
        ],
        dir,
    );
    let locked = succeed(
        &[
            "stack",
            "lock",
            "kept",
            "--level",
            "stacks",
            "--reason",
            "db upgrade",
            "--wait",
        ],
        dir,
    );
    assert_eq!(
        locked.lines().last(),
        Some("stack kept LOCK_COMPLETE"),
        "{locked}"
    );
    // Not allowed exits non-zero, so a script can test it.
    let not_allowed = ember(&["stack", "allowed", "kept", "delete"], dir);
    assert!(!not_allowed.status.success(), "{}", text(&not_allowed));
    assert!(
        String::from_utf8_lossy(&not_allowed.stderr)
            .contains("delete is not allowed on stack kept"),
        "{}",
        text(&not_allowed)
    );
    let allowed = String::from_utf8_lossy(&not_allowed.stdout).into_owned();
    assert!(
        allowed.starts_with(
            "delete: not allowed\n  maintenance_lock (conflict): stack \"kept\" is locked"
        ),
        "{allowed}"
    );
    assert!(
        allowed.contains("an admin's --break-glass REASON would run it"),
        "{allowed}"
    );
    assert!(
        allowed.contains("locked at level stacks by owner demo"),
        "{allowed}"
    );
    assert!(allowed.contains(": db upgrade"), "{allowed}");
    let refused = ember(&["stack", "delete", "kept"], dir);
    assert!(!refused.status.success());
    assert!(
        text(&refused).contains("unlock it first"),
        "{}",
        text(&refused)
    );
    let unlocked = succeed(&["stack", "unlock", "kept", "--wait"], dir);
    assert_eq!(
        unlocked.lines().last(),
        Some("stack kept UNLOCK_COMPLETE"),
        "{unlocked}"
    );
    assert!(succeed(&["stack", "allowed", "kept", "delete"], dir).starts_with("delete: allowed"));
}

/// The README's quick start, as written: the shipped example template with
/// a parameter, its outputs, and the delete.
#[test]
fn the_quick_start_works_with_the_shipped_example() {
    let data_dir = tempfile::tempdir().expect("tempdir");
    let dir = data_dir.path();
    let _dev = Dev::start(dir);
    let example = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../examples/web.yaml")
        .display()
        .to_string();
    let created = ember(
        &[
            "stack",
            "create",
            "web",
            "-t",
            &example,
            "-P",
            "length=20",
            "--wait",
        ],
        dir,
    );
    assert!(created.status.success(), "{}", text(&created));
    assert!(
        String::from_utf8_lossy(&created.stdout).contains("CREATE_COMPLETE"),
        "{}",
        text(&created)
    );
    let outputs = ember(&["stack", "outputs", "web"], dir);
    assert!(outputs.status.success(), "{}", text(&outputs));
    let printed = String::from_utf8_lossy(&outputs.stdout).into_owned();
    let secret = printed
        .lines()
        .find(|line| line.starts_with("secret"))
        .unwrap_or_else(|| panic!("no secret output: {printed}"));
    assert_eq!(
        secret.split_whitespace().nth(1).map(str::len),
        Some(20),
        "the parameter reached the RandomString: {printed}"
    );
    assert!(
        printed.lines().any(|line| line.starts_with("server")),
        "{printed}"
    );
    let deleted = ember(&["stack", "delete", "web", "--wait"], dir);
    assert!(deleted.status.success(), "{}", text(&deleted));
}

/// `ember stack wait` follows an operation some other client started (here
/// `stack create` without --wait) to its end; a failure ends it non-zero
/// with the reason, and a wait cut short by --wait-timeout says so.
#[test]
fn stack_wait_follows_an_operation_started_elsewhere() {
    let data_dir = tempfile::tempdir().expect("tempdir");
    let dir = data_dir.path();
    let template = write_templates(dir);
    let _dev = Dev::start(dir);
    std::fs::write(
        dir.join("templates/slow.yaml"),
        "heat_template_version: 2018-08-31\nresources:\n  slow:\n    type: OS::Heat::TestResource\n    properties:\n      action_wait_secs: {create: 30}\n",
    )
    .expect("slow template");

    succeed(
        &["stack", "create", "w", "-t", &template, "-P", "greeting=hi"],
        dir,
    );
    let waited = succeed(&["stack", "wait", "w"], dir);
    assert!(
        waited.trim_end().ends_with("stack w CREATE_COMPLETE"),
        "{waited}"
    );
    assert_eq!(
        succeed(&["stack", "show", "w", "-f", "value", "-c", "status"], dir).trim(),
        "CREATE_COMPLETE"
    );
    // Nothing in progress: it returns at once with the status.
    let settled = succeed(&["stack", "wait", "w"], dir);
    assert_eq!(settled.trim(), "stack w CREATE_COMPLETE");

    let failing = dir.join("templates/failing.yaml").display().to_string();
    succeed(&["stack", "create", "broken", "-t", &failing], dir);
    let failed = ember(&["stack", "wait", "broken"], dir);
    assert_eq!(failed.status.code(), Some(1), "{}", text(&failed));
    let stderr = String::from_utf8_lossy(&failed.stderr);
    assert!(stderr.contains("CREATE_FAILED"), "{}", text(&failed));

    let slow = dir.join("templates/slow.yaml").display().to_string();
    succeed(&["stack", "create", "slow", "-t", &slow], dir);
    let cut = ember(&["stack", "wait", "slow", "--wait-timeout", "1"], dir);
    assert_eq!(cut.status.code(), Some(9), "timed out: {}", text(&cut));
    assert!(
        String::from_utf8_lossy(&cut.stderr).contains("still CREATE_IN_PROGRESS after 1 s"),
        "{}",
        text(&cut)
    );

    let unknown = ember(&["stack", "wait", "nothing-here"], dir);
    assert_eq!(
        unknown.status.code(),
        Some(4),
        "not found: {}",
        text(&unknown)
    );
}
