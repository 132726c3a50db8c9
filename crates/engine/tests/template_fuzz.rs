//! Property-based fuzzing of what a caller's template goes through before
//! anything is recorded (issue 13): the document parser, parameters,
//! conditions, intrinsic functions and resource types, fed arbitrary
//! documents and arbitrary nestings of functions. Whatever comes in, the
//! answer is a value or an error naming what was wrong — never a panic, and
//! never unbounded work.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use ember_engine::domain::template::StackIdentity;
use ember_engine::resources::ResourceTypeRegistry;
use ember_engine::stacks::{DefinitionInput, ParsedStack, definition_from_input};
use proptest::prelude::*;
use serde_json::{Map, Value, json};

/// Arbitrary JSON, with the keys templates use mixed in.
fn any_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|n| json!(n)),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(|f| json!(f)),
        "[a-z%<>_ .:-]{0,12}".prop_map(Value::String),
        prop::sample::select(vec![
            "OS::Heat::None",
            "OS::Heat::Value",
            "OS::Heat::RandomString",
            "OS::Heat::ResourceGroup",
            "OS::Heat::AutoScalingGroup",
            "OS::Heat::Stack",
            "OS::Nova::Server",
            "2021-04-16",
            "2013-05-23",
            "number",
            "string",
            "json",
            "comma_delimited_list",
        ])
        .prop_map(|text| Value::String(text.to_owned())),
    ];
    leaf.prop_recursive(6, 96, 6, |inner| {
        let keys = prop::sample::select(vec![
            "get_param",
            "get_attr",
            "get_resource",
            "repeat",
            "for_each",
            "template",
            "str_replace",
            "params",
            "list_join",
            "if",
            "equals",
            "not",
            "and",
            "or",
            "yaql",
            "map_merge",
            "map_replace",
            "str_split",
            "list_concat",
            "digest",
            "type",
            "properties",
            "value",
            "count",
            "resource_def",
            "depends_on",
            "condition",
            "default",
            "x",
        ]);
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::btree_map(keys, inner, 0..4).prop_map(|map| {
                Value::Object(map.into_iter().map(|(k, v)| (k.to_owned(), v)).collect())
            }),
        ]
    })
}

/// A template-shaped document: version, parameters, conditions,
/// resources and outputs whose bodies are arbitrary.
fn any_template() -> impl Strategy<Value = Value> {
    (
        prop::sample::select(vec![
            "2021-04-16",
            "2013-05-23",
            "2018-08-31",
            "queens",
            "1999",
        ]),
        prop::collection::btree_map("[a-z]{1,4}", any_json(), 0..3),
        prop::collection::btree_map("[a-z]{1,4}", any_json(), 0..5),
        prop::collection::btree_map("[a-z]{1,4}", any_json(), 0..2),
        any_json(),
    )
        .prop_map(|(version, parameters, resources, outputs, conditions)| {
            json!({
                "heat_template_version": version,
                "parameters": parameters,
                "conditions": conditions,
                "resources": resources,
                "outputs": outputs,
            })
        })
}

/// A template most of which validates: real types with arbitrary values
/// (functions included) in the properties that take any value, declared
/// parameters, and references between the resources.
fn runnable_template() -> impl Strategy<Value = Value> {
    let resource = prop_oneof![
        any_json().prop_map(|value| json!({"type": "OS::Heat::Value", "properties": {"value": value}})),
        Just(json!({"type": "OS::Heat::None"})),
        (0u32..70).prop_map(|length| json!({"type": "OS::Heat::RandomString", "properties": {"length": length}})),
        (0u32..4).prop_map(|count| json!({"type": "OS::Heat::ResourceGroup",
            "properties": {"count": count, "resource_def": {"type": "OS::Heat::None"}}})),
        (any_json(), any::<bool>()).prop_map(|(value, fail)| json!({"type": "OS::Heat::TestResource",
            "properties": {"value": value, "fail": fail}})),
        prop::sample::select(vec!["a", "b", "c"]).prop_map(|other| json!({"type": "OS::Heat::Value",
            "properties": {"value": {"list_join": ["-", [{"get_param": "p"}, {"get_resource": other}]]}}})),
    ];
    prop::collection::btree_map(prop::sample::select(vec!["a", "b", "c", "d", "e"]), resource, 1..5)
        .prop_map(|resources| {
            json!({
                "heat_template_version": "2021-04-16",
                "parameters": {"p": {"type": "string", "default": "x"}, "n": {"type": "number", "default": 3}},
                "resources": resources,
                "outputs": {"o": {"value": {"get_attr": ["a", "value"]}}},
            })
        })
}

fn build(template: &Value, parameters: Map<String, Value>) -> Duration {
    let registry = ResourceTypeRegistry::builtin();
    let started = Instant::now();
    let text = template.to_string();
    if let Ok(definition) = definition_from_input(DefinitionInput {
        template: &text,
        environment: "",
        environment_files: &[],
        files: BTreeMap::new(),
        parameters,
    }) {
        let _ = ParsedStack::build(
            &definition,
            StackIdentity {
                stack_name: "fuzz".into(),
                stack_id: "00000000-0000-0000-0000-000000000000".into(),
                project_id: "fuzz".into(),
            },
            &registry,
        );
    }
    started.elapsed()
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 400,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn any_document_is_answered_without_panic(document in any_json()) {
        let took = build(&document, Map::new());
        prop_assert!(took < Duration::from_secs(5), "took {took:?}");
    }

    #[test]
    fn any_template_shaped_document_is_answered_without_panic(
        template in any_template(),
        parameters in prop::collection::btree_map("[a-z]{1,4}", any_json(), 0..3),
    ) {
        let took = build(&template, parameters.into_iter().collect());
        prop_assert!(took < Duration::from_secs(5), "took {took:?}");
    }

    /// Text that is not JSON at all (YAML, or noise) is parsed or refused.
    #[test]
    fn any_text_is_answered_without_panic(text in "\\PC{0,400}") {
        let _ = definition_from_input(DefinitionInput {
            template: &text,
            environment: &text,
            environment_files: &[],
            files: BTreeMap::new(),
            parameters: Map::new(),
        });
    }
}

/// The same documents through a real create on SQLite: accepted ones run to
/// a final state (a panic in a run would leave the stack in progress).
#[test]
fn accepted_documents_run_to_a_final_state() {
    use std::sync::Arc;

    use ember_engine::stacks::{CreateStack, StackOperations};
    use ember_engine::store::{SqlStackStore, StackStore, migrations::Migrator};
    use ember_runtime::database::{connect_and_migrate, testing::TestDatabase};
    use proptest::strategy::ValueTree;
    use proptest::test_runner::TestRunner;

    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(async {
        let database = TestDatabase::sqlite().await;
        let connection = connect_and_migrate::<Migrator>(&database.url)
            .await
            .expect("migrated");
        let store: Arc<dyn StackStore> = Arc::new(SqlStackStore::new(connection));
        let operations = StackOperations::new(store, Arc::new(ResourceTypeRegistry::builtin()));
        let caller = ember_runtime::Identity::new("fuzz", "fuzz", vec!["member".into()]);
        let mut runner = TestRunner::deterministic();
        let mut accepted = 0;
        for case in 0..150 {
            let template = runnable_template()
                .new_tree(&mut runner)
                .expect("a case")
                .current();
            let created = operations
                .create_stack(
                    &caller,
                    CreateStack {
                        name: format!("fuzz-{case}"),
                        template: template.to_string(),
                        disable_rollback: case % 2 == 0,
                        ..CreateStack::default()
                    },
                )
                .await;
            let Ok(stack) = created else {
                continue;
            };
            accepted += 1;
            let deadline = Instant::now() + Duration::from_secs(10);
            loop {
                let current = operations
                    .find_stack(&caller, &stack.id.to_string())
                    .await
                    .expect("stack");
                if current.status != ember_engine::domain::ActionStatus::InProgress {
                    break;
                }
                assert!(
                    Instant::now() < deadline,
                    "case {case} still {}: {template}",
                    current.stack_status()
                );
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        }
        eprintln!("{accepted} of 150 generated templates were accepted and ran to a final state");
    });
}
