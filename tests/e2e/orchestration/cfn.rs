//! The CloudFormation template format (issue 16): a stack made from an
//! `AWSTemplateFormatVersion: 2010-09-09` template with every function
//! Heat's CFN format has, conditions, pseudo-parameters and a nested
//! `AWS::CloudFormation::Stack`; `Mappings` read by `Fn::FindInMap`
//! with keys written out, `AWS::Region` and a parameter's value; bad CFN
//! refused up front.

use reqwest::StatusCode;
use serde_json::{Value, json};

use ember_tests::TestEmber;

use super::HeatRest;

fn template() -> Value {
    json!({
        "AWSTemplateFormatVersion": "2010-09-09",
        "Description": "every CFN function",
        "Parameters": {
            "Size": {"Type": "Number", "Default": "8", "MinValue": 4, "MaxValue": 32},
            "Names": {"Type": "CommaDelimitedList", "Default": "alpha,beta,gamma"},
            "Env": {"Type": "String", "Default": "prod", "AllowedValues": ["prod", "dev"]},
        },
        "Conditions": {
            "IsProd": {"Fn::Equals": [{"Ref": "Env"}, "prod"]},
            "IsDev": {"Fn::Not": [{"Condition": "IsProd"}]},
            "ProdAndBig": {"Fn::And": [{"Condition": "IsProd"}, {"Fn::Equals": [{"Ref": "Size"}, 8]}]},
        },
        "Resources": {
            "Word": {"Type": "OS::Heat::RandomString", "Properties": {"length": {"Ref": "Size"}}},
            "DevOnly": {"Type": "OS::Heat::None", "Condition": "IsDev"},
            "Child": {"Type": "AWS::CloudFormation::Stack",
                      "Properties": {"TemplateURL": "child.json", "Parameters": {"Greeting": "hello"}}},
            "Joined": {"Type": "OS::Heat::Value", "DependsOn": "Word", "Properties": {"value": {
                "Fn::Join": ["/", [
                    {"Ref": "AWS::StackName"},
                    {"Fn::Select": ["1", {"Ref": "Names"}]},
                    {"Fn::Select": [0, {"Fn::GetAZs": ""}]},
                    {"Fn::Base64": "plain"},
                    {"Ref": "AWS::Region"},
                    {"Fn::If": ["IsProd", "production", "development"]},
                ]]}}},
        },
        "Outputs": {
            "Joined": {"Value": {"Fn::GetAtt": ["Joined", "value"]}},
            "WordLength": {"Value": {"Fn::Join": ["", [{"Ref": "Size"}]]}},
            "Word": {"Value": {"Fn::GetAtt": ["Word", "value"]}},
            "Split": {"Value": {"Fn::Split": [",", "a,b,c"]}},
            "Replaced": {"Value": {"Fn::Replace": [{"%name%": {"Ref": "AWS::StackName"}}, "stack %name%"]}},
            "Tags": {"Value": {"Fn::MemberListToMap": ["Key", "Value",
                [".member.0.Key=team", ".member.0.Value=web", ".member.1.Key=tier", ".member.1.Value=2"]]}},
            "FromChild": {"Value": {"Fn::GetAtt": ["Child", "Outputs.Echo"]}},
            "StackId": {"Value": {"Ref": "AWS::StackId"}},
            "Big": {"Value": "yes", "Condition": "ProdAndBig"},
        },
    })
}

fn child() -> String {
    json!({
        "HeatTemplateFormatVersion": "2012-12-12",
        "Parameters": {"Greeting": {"Type": "String"}},
        "Resources": {"Echo": {"Type": "OS::Heat::Value",
                               "Properties": {"value": {"Fn::Join": [" ", [{"Ref": "Greeting"}, "world"]]}}}},
        "Outputs": {"Echo": {"Value": {"Fn::GetAtt": ["Echo", "value"]}}},
    })
    .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cloudformation_template_runs_with_every_function() {
    let ember = TestEmber::start().await;
    let heat = HeatRest::member(&ember);
    let created = heat
        .post(
            "/stacks",
            json!({"stack_name": "cfn", "template": template(), "files": {"child.json": child()}}),
        )
        .await;
    assert_eq!(created.status, StatusCode::CREATED, "{created:?}");
    let id = created.body["stack"]["id"].as_str().expect("id").to_owned();
    let stack = format!("/stacks/cfn/{id}");
    let settled = heat.wait_until_settled(&stack).await;
    assert_eq!(settled["stack_status"], "CREATE_COMPLETE", "{settled}");
    assert_eq!(settled["description"], "every CFN function");
    let output = |key: &'static str| {
        let heat = &heat;
        let stack = stack.clone();
        async move {
            heat.get(&format!("{stack}/outputs/{key}")).await.body["output"]["output_value"].clone()
        }
    };
    assert_eq!(
        output("Joined").await,
        "cfn/beta/nova/plain/RegionOne/production"
    );
    assert_eq!(output("Word").await.as_str().map(str::len), Some(8));
    assert_eq!(output("Split").await, json!(["a", "b", "c"]));
    assert_eq!(output("Replaced").await, "stack cfn");
    assert_eq!(output("Tags").await, json!({"team": "web", "tier": "2"}));
    assert_eq!(output("FromChild").await, "hello world");
    assert_eq!(output("StackId").await, id.as_str());
    assert_eq!(output("Big").await, "yes");
    let resources = heat.get(&format!("{stack}/resources")).await;
    let names: Vec<&str> = resources.body["resources"]
        .as_array()
        .expect("resources")
        .iter()
        .filter_map(|resource| resource["resource_name"].as_str())
        .collect();
    assert!(
        !names.contains(&"DevOnly"),
        "its condition is false: {names:?}"
    );
    // The stack's template is the one sent, in its format.
    let shown = heat.get(&format!("{stack}/template")).await;
    assert_eq!(
        shown.body["AWSTemplateFormatVersion"], "2010-09-09",
        "{shown:?}"
    );

    // Bad CFN is refused before anything runs, naming the place.
    for (template, expected) in [
        (
            json!({"AWSTemplateFormatVersion": "2010-09-09",
                "Resources": {"r": {"Type": "OS::Heat::None", "Colour": 1}}}),
            "unknown key 'Colour'",
        ),
        (
            json!({"AWSTemplateFormatVersion": "2010-09-09",
                "Parameters": {"p": {"Type": "Float"}}, "Resources": {}}),
            "unknown parameter type 'Float'",
        ),
        (
            json!({"AWSTemplateFormatVersion": "2010-09-09",
                "Resources": {"r": {"Type": "OS::Heat::Value",
                    "Properties": {"value": {"Fn::FindInMap": ["m", "a", "b"]}}}}}),
            "Fn::FindInMap: there is no mapping \"m\"",
        ),
    ] {
        let refused = heat
            .post(
                "/stacks",
                json!({"stack_name": "bad-cfn", "template": template}),
            )
            .await;
        assert_eq!(refused.status, StatusCode::BAD_REQUEST, "{refused:?}");
        assert!(
            refused.message().contains(expected),
            "{expected}: {refused:?}"
        );
    }
    ember.stop().await;
}

/// The AWS sample templates' pattern: an image by region and by the
/// architecture an instance type maps to — keys written out, the region,
/// and a parameter's value (chosen when the stack resolves; a value that
/// is no key of the mapping fails the resource, naming the mapping).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mappings_are_read_by_find_in_map() {
    let ember = TestEmber::start().await;
    let heat = HeatRest::member(&ember);
    let template = json!({
        "AWSTemplateFormatVersion": "2010-09-09",
        "Parameters": {"InstanceType": {"Type": "String", "Default": "m1.small"}},
        "Mappings": {
            "InstanceTypeArch": {"m1.small": {"Arch": "64"}, "t1.micro": {"Arch": "32"}},
            "RegionArchImage": {"RegionOne": {"32": "cirros-32", "64": "cirros-64"},
                                "us-east-1": {"32": "ami-1", "64": "ami-2"}},
        },
        "Resources": {"Image": {"Type": "OS::Heat::Value", "Properties": {"value": {
            "Fn::FindInMap": ["RegionArchImage", {"Ref": "AWS::Region"},
                {"Fn::FindInMap": ["InstanceTypeArch", {"Ref": "InstanceType"}, "Arch"]}]}}}},
        "Outputs": {
            "Image": {"Value": {"Fn::GetAtt": ["Image", "value"]}},
            "Written": {"Value": {"Fn::FindInMap": ["RegionArchImage", "us-east-1", "32"]}},
        },
    });
    for (name, parameters, image) in [
        ("mapped", json!({}), "cirros-64"),
        (
            "mapped-micro",
            json!({"InstanceType": "t1.micro"}),
            "cirros-32",
        ),
    ] {
        let created = heat
            .post(
                "/stacks",
                json!({"stack_name": name, "template": template, "parameters": parameters}),
            )
            .await;
        assert_eq!(created.status, StatusCode::CREATED, "{created:?}");
        let stack = format!(
            "/stacks/{name}/{}",
            created.body["stack"]["id"].as_str().expect("id")
        );
        let settled = heat.wait_until_settled(&stack).await;
        assert_eq!(settled["stack_status"], "CREATE_COMPLETE", "{settled}");
        let output = heat.get(&format!("{stack}/outputs/Image")).await;
        assert_eq!(output.body["output"]["output_value"], image, "{output:?}");
        let written = heat.get(&format!("{stack}/outputs/Written")).await;
        assert_eq!(
            written.body["output"]["output_value"], "ami-1",
            "{written:?}"
        );
    }
    let refused = heat
        .post(
            "/stacks",
            json!({"stack_name": "unmapped", "template": template,
                "parameters": {"InstanceType": "x9.huge"}}),
        )
        .await;
    // Accepted (the value is only known when the stack resolves), and the
    // resource fails naming the mapping and its keys.
    assert_eq!(refused.status, StatusCode::CREATED, "{refused:?}");
    let stack = format!(
        "/stacks/unmapped/{}",
        refused.body["stack"]["id"].as_str().expect("id")
    );
    let settled = heat.wait_until_settled(&stack).await;
    assert_eq!(settled["stack_status"], "CREATE_FAILED", "{settled}");
    assert!(
        settled["stack_status_reason"]
            .as_str()
            .is_some_and(|reason| {
                reason.contains("not a key of mapping InstanceTypeArch (m1.small, t1.micro)")
            }),
        "{settled}"
    );
    ember.stop().await;
}
