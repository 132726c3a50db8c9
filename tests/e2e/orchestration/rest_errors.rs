//! The error answers Heat clients rely on: 400 naming the bad input, 409
//! for a duplicate name, 404 for another project's stack, 403 for another
//! project's URL, 401 without a token — each in OpenStack's error body.

use ember_runtime::Identity;
use ember_runtime::auth::TokenSigner;
use ember_tests::TestEmber;
use reqwest::{Method, StatusCode};
use serde_json::json;

use super::HeatRest;

#[tokio::test]
async fn bad_bodies_and_bad_templates_are_400_naming_what_is_wrong() {
    let ember = TestEmber::start().await;
    let heat = HeatRest::member(&ember);

    let bad_property = heat
        .post(
            "/stacks",
            json!({
                "stack_name": "broken",
                "template": {
                    "heat_template_version": "2018-08-31",
                    "resources": {"slow": {"type": "OS::Heat::TestResource", "properties": {"colour": "red"}}},
                },
            }),
        )
        .await;
    assert_eq!(
        bad_property.status,
        StatusCode::BAD_REQUEST,
        "{bad_property:?}"
    );
    assert_eq!(bad_property.body["error"]["type"], "InvalidInput");
    assert!(
        bad_property.message().contains("resources.slow.properties"),
        "the message names the template path: {bad_property:?}"
    );

    let missing_parameter = heat
        .post(
            "/stacks",
            json!({"stack_name": "broken", "template": super::stack_template()}),
        )
        .await;
    assert_eq!(missing_parameter.status, StatusCode::BAD_REQUEST);
    assert!(
        missing_parameter.message().contains("greeting"),
        "{missing_parameter:?}"
    );

    for (body, expected) in [
        // An unknown key is ignored as Heat ignores it; the template is
        // still checked.
        (
            json!({"stack_name": "x", "template": {}, "colour": "red"}),
            "The template version is invalid: Template version was not provided",
        ),
        (
            json!({"stack_name": "x", "template_url": "http://example.org/t.yaml"}),
            "template_url is not supported",
        ),
        (
            json!({"stack_name": "x", "template": {}, "timeout_mins": "soon"}),
            "timeout_mins",
        ),
        (json!({"template": {}}), "stack_name"),
        (json!(["not", "an", "object"]), "JSON object"),
    ] {
        let answer = heat.post("/stacks", body.clone()).await;
        assert_eq!(answer.status, StatusCode::BAD_REQUEST, "{body}: {answer:?}");
        assert!(answer.message().contains(expected), "{body}: {answer:?}");
    }
    assert_eq!(
        heat.get("/stacks").await.body["stacks"],
        json!([]),
        "nothing recorded"
    );

    // Clients such as TripleO's send keys Heat does not take: a create
    // with one goes through.
    let tolerant = heat
        .post(
            "/stacks",
            json!({"stack_name": "tolerant", "existing": true,
                "template": {"heat_template_version": "2021-04-16", "resources": {}}}),
        )
        .await;
    assert_eq!(tolerant.status, StatusCode::CREATED, "{tolerant:?}");

    let stack_path = heat.create_stack("web", json!({"greeting": "hi"})).await;
    for (body, expected) in [
        (json!({"launch": null}), "unknown action \"launch\""),
        (
            json!({"lock": {"level": "galaxy"}}),
            "lock level \"galaxy\" is not one of stacks, all",
        ),
        (
            json!({"suspend": null, "resume": null}),
            "one action at a time",
        ),
        (json!({}), "no action given"),
    ] {
        let answer = heat
            .post(&format!("{stack_path}/actions"), body.clone())
            .await;
        assert_eq!(answer.status, StatusCode::BAD_REQUEST, "{body}: {answer:?}");
        assert!(answer.message().contains(expected), "{body}: {answer:?}");
    }
    let events = heat
        .get(&format!("{stack_path}/events?sort_dir=sideways"))
        .await;
    assert_eq!(events.status, StatusCode::BAD_REQUEST);
    heat.wait_until_settled(&stack_path).await;
    ember.stop().await;
}

/// A parameter's `allowed_pattern` reads as Heat's Python `re.match`:
/// a look-ahead password rule refuses a weak value with 400 naming the
/// parameter and takes a strong one.
#[tokio::test]
async fn an_allowed_pattern_with_look_ahead_is_checked_as_heat_checks_it() {
    let ember = TestEmber::start().await;
    let heat = HeatRest::member(&ember);
    let template = json!({
        "heat_template_version": "2021-04-16",
        "parameters": {"password": {
            "type": "string",
            "hidden": true,
            "constraints": [{
                "allowed_pattern": "^(?=.*[A-Z])(?=.*\\d)[A-Za-z\\d]{8,}$",
                "description": "8 or more letters and digits, with a capital and a digit",
            }],
        }},
        "resources": {"none": {"type": "OS::Heat::None"}},
    });
    let weak = heat
        .post(
            "/stacks",
            json!({"stack_name": "vault", "template": template, "parameters": {"password": "password1"}}),
        )
        .await;
    assert_eq!(weak.status, StatusCode::BAD_REQUEST, "{weak:?}");
    assert!(
        weak.message().contains("password")
            && weak.message().contains("with a capital and a digit"),
        "{weak:?}"
    );
    let strong = heat
        .post(
            "/stacks",
            json!({"stack_name": "vault", "template": template, "parameters": {"password": "Password1"}}),
        )
        .await;
    assert_eq!(strong.status, StatusCode::CREATED, "{strong:?}");
}

#[tokio::test]
async fn a_duplicate_name_is_409_and_a_wrong_name_for_an_id_is_404() {
    let ember = TestEmber::start().await;
    let heat = HeatRest::member(&ember);
    let stack_path = heat.create_stack("web", json!({"greeting": "hi"})).await;

    let duplicate = heat
        .post(
            "/stacks",
            json!({"stack_name": "web", "template": super::stack_template(), "parameters": {"greeting": "again"}}),
        )
        .await;
    assert_eq!(duplicate.status, StatusCode::CONFLICT, "{duplicate:?}");
    assert!(duplicate.message().contains("web"), "{duplicate:?}");

    let id = stack_path.rsplit('/').next().expect("id");
    let misnamed = heat.get(&format!("/stacks/other/{id}")).await;
    assert_eq!(misnamed.status, StatusCode::NOT_FOUND, "{misnamed:?}");
    let misnamed_delete = heat
        .call(Method::DELETE, &format!("/stacks/other/{id}"), None)
        .await;
    assert_eq!(misnamed_delete.status, StatusCode::NOT_FOUND);
    heat.wait_until_settled(&stack_path).await;
    ember.stop().await;
}

#[tokio::test]
async fn projects_are_walled_off_and_a_token_is_required() {
    let ember = TestEmber::start().await;
    let heat = HeatRest::member(&ember);
    let stack_path = heat.create_stack("web", json!({"greeting": "hi"})).await;

    // A member of another project does not see demo's stack: 404, not 403.
    let signer = TokenSigner::new(&ember.secrets().signing_key);
    let outsider = signer
        .issue(
            &Identity::new("eve", "other", vec!["member".to_owned()]),
            std::time::Duration::from_secs(600),
        )
        .expect("token");
    let other = HeatRest::new(&ember, "other", Some(&outsider));
    for path in [
        stack_path.clone(),
        "/stacks/web".to_owned(),
        format!("{stack_path}/resources"),
    ] {
        let answer = other.get(&path).await;
        assert_eq!(answer.status, StatusCode::NOT_FOUND, "{path}: {answer:?}");
    }
    let delete = other.call(Method::DELETE, &stack_path, None).await;
    assert_eq!(delete.status, StatusCode::NOT_FOUND);
    assert_eq!(other.get("/stacks").await.body["stacks"], json!([]));

    // demo's URL with the outsider's token: 403 naming the project.
    let wrong_url = HeatRest::new(&ember, "demo", Some(&outsider));
    let answer = wrong_url.get(&stack_path).await;
    assert_eq!(answer.status, StatusCode::FORBIDDEN, "{answer:?}");
    assert!(answer.message().contains("demo"), "{answer:?}");
    let answer = wrong_url
        .post("/stacks", json!({"stack_name": "x", "template": {}}))
        .await;
    assert_eq!(answer.status, StatusCode::FORBIDDEN);

    // No token at all: 401 before anything else.
    let anonymous = HeatRest::new(&ember, "demo", None);
    for (method, path) in [
        (Method::GET, stack_path.clone()),
        (Method::POST, "/stacks".to_owned()),
        (Method::DELETE, stack_path.clone()),
        (Method::POST, format!("{stack_path}/actions")),
        (Method::GET, "/resource_types".to_owned()),
    ] {
        let answer = anonymous.call(method.clone(), &path, Some(json!({}))).await;
        assert_eq!(
            answer.status,
            StatusCode::UNAUTHORIZED,
            "{method} {path}: {answer:?}"
        );
        assert_eq!(answer.body["error"]["type"], "NotAuthenticated");
    }
    let stack = heat.wait_until_settled(&stack_path).await;
    assert_eq!(
        stack["stack_status"], "CREATE_COMPLETE",
        "untouched by the others"
    );
    ember.stop().await;
}
