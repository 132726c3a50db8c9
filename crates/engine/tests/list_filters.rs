//! Heat's resource and event list filters, applied by the store's query
//! (the values of one filter OR-ed, different filters AND-ed, a page cut
//! after filtering and a marker paging on among the matches), on SQLite and
//! PostgreSQL.

mod stack_support;

use chrono::Duration;
use ember_engine::domain::{ActionStatus, Event, Resource, Stack, StackAction, StackDefinition};
use ember_engine::store::{
    EventListQuery, LeaseRequest, NewStack, ResourceFilter, SqlStackStore, StackStore,
};
use ember_runtime::database::testing::TestDatabase;
use uuid::Uuid;

fn stack(name: &str, parent: Option<(Uuid, &str)>) -> Stack {
    Stack {
        parent_id: parent.map(|(id, _)| id),
        nested_depth: u32::from(parent.is_some()),
        parent_resource: parent.map(|(_, resource)| resource.to_owned()),
        ..stack_support::stack_row("demo", name)
    }
}

/// A resource created `order` seconds after the others began, so the
/// list's order (creation time, then name) is the fixture's.
fn resource(
    stack_id: Uuid,
    order: i64,
    name: &str,
    type_name: &str,
    (action, status): (StackAction, ActionStatus),
    physical_id: Option<&str>,
) -> Resource {
    let at = ember_runtime::time::now() + Duration::seconds(order);
    Resource {
        id: Uuid::now_v7(),
        stack_id,
        name: name.to_owned(),
        type_name: type_name.to_owned(),
        physical_id: physical_id.map(str::to_owned),
        action,
        status,
        status_reason: String::new(),
        properties: serde_json::json!({}),
        attributes: serde_json::json!({}),
        metadata: serde_json::json!({}),
        data: serde_json::json!({}),
        created_at: at,
        updated_at: at,
    }
}

async fn insert(store: &SqlStackStore, stack: &Stack, resources: Vec<Resource>) {
    let now = ember_runtime::time::now();
    let fence = store
        .create_stack_with_lease(&NewStack {
            stack: stack.clone(),
            definition: StackDefinition::default(),
            resources,
            event: Event::for_stack(stack, "Stack CREATE started", now),
            lease: LeaseRequest::new(Uuid::now_v7(), "CREATE", now, now + Duration::seconds(60)),
        })
        .await
        .expect("stack stored");
    store.release_stack_lease(fence).await.expect("released");
}

fn strings(values: &[&str]) -> Vec<String> {
    values.iter().map(|value| (*value).to_owned()).collect()
}

async fn resources_filtered_by_each_filter_and_together(database: &TestDatabase) {
    let store = stack_support::stack_store(database).await;
    let parent = stack("web", None);
    let child = stack("web-inner-x", Some((parent.id, "inner")));
    use ActionStatus::{Complete, Failed, InProgress};
    use StackAction::{Create, Update};
    let rows = vec![
        resource(
            parent.id,
            1,
            "a",
            "OS::Heat::None",
            (Create, Complete),
            Some("a-id"),
        ),
        resource(
            parent.id,
            2,
            "b",
            "OS::Heat::RandomString",
            (Create, Failed),
            Some("b-id"),
        ),
        resource(
            parent.id,
            3,
            "c",
            "OS::Heat::None",
            (Update, InProgress),
            Some("c-id"),
        ),
        // A nested stack resource whose physical id is not written yet.
        resource(
            parent.id,
            4,
            "inner",
            "OS::Heat::Stack",
            (Create, InProgress),
            None,
        ),
    ];
    insert(&store, &parent, rows).await;
    insert(&store, &child, Vec::new()).await;
    let listed = |filter: ResourceFilter| {
        let store = &store;
        let id = parent.id;
        async move {
            store
                .list_filtered_resources(id, &filter)
                .await
                .expect("listed")
                .into_iter()
                .map(|resource| resource.name)
                .collect::<Vec<_>>()
        }
    };
    let all = listed(ResourceFilter::default()).await;
    assert_eq!(all, ["a", "b", "c", "inner"]);
    let unfiltered: Vec<String> = store
        .list_resources(parent.id)
        .await
        .expect("listed")
        .into_iter()
        .map(|resource| resource.name)
        .collect();
    assert_eq!(all, unfiltered);

    let by = |names: &[&str], types: &[&str], actions: &[&str], statuses: &[&str]| ResourceFilter {
        names: strings(names),
        types: strings(types),
        actions: strings(actions),
        statuses: strings(statuses),
        physical_ids: Vec::new(),
    };
    // Each filter alone; its values are alternatives.
    assert_eq!(listed(by(&["a", "c"], &[], &[], &[])).await, ["a", "c"]);
    assert_eq!(
        listed(by(&[], &["OS::Heat::None"], &[], &[])).await,
        ["a", "c"]
    );
    assert_eq!(
        listed(by(
            &[],
            &["OS::Heat::RandomString", "OS::Heat::Stack"],
            &[],
            &[]
        ))
        .await,
        ["b", "inner"]
    );
    assert_eq!(
        listed(by(&[], &[], &["CREATE"], &[])).await,
        ["a", "b", "inner"]
    );
    assert_eq!(
        listed(by(&[], &[], &["UPDATE", "DELETE"], &[])).await,
        ["c"]
    );
    // A status alone, of any action, or with its action.
    assert_eq!(listed(by(&[], &[], &[], &["FAILED"])).await, ["b"]);
    assert_eq!(listed(by(&[], &[], &[], &["CREATE_FAILED"])).await, ["b"]);
    assert_eq!(
        listed(by(&[], &[], &[], &["IN_PROGRESS"])).await,
        ["c", "inner"]
    );
    assert_eq!(
        listed(by(&[], &[], &[], &["CREATE_IN_PROGRESS"])).await,
        ["inner"]
    );
    assert_eq!(
        listed(by(&[], &[], &[], &["COMPLETE", "UPDATE_IN_PROGRESS"])).await,
        ["a", "c"]
    );
    assert!(
        listed(by(&[], &[], &[], &["UPDATE_FAILED"]))
            .await
            .is_empty()
    );
    assert!(listed(by(&[], &[], &[], &["IN"])).await.is_empty());
    assert!(listed(by(&["nope"], &[], &[], &[])).await.is_empty());
    // Different filters all apply.
    assert_eq!(
        listed(by(&[], &["OS::Heat::None"], &[], &["COMPLETE"])).await,
        ["a"]
    );
    assert_eq!(
        listed(by(
            &["a", "b", "c"],
            &[],
            &["CREATE"],
            &["FAILED", "COMPLETE"]
        ))
        .await,
        ["a", "b"]
    );
    assert!(listed(by(&["a"], &[], &["UPDATE"], &[])).await.is_empty());

    // Physical ids, a nested stack resource's by its nested stack's id.
    let physical = |ids: &[&str]| ResourceFilter {
        physical_ids: strings(ids),
        ..ResourceFilter::default()
    };
    assert_eq!(listed(physical(&["b-id"])).await, ["b"]);
    assert_eq!(listed(physical(&["a-id", "c-id"])).await, ["a", "c"]);
    let child_id = child.id.to_string();
    assert_eq!(listed(physical(&[&child_id])).await, ["inner"]);
    assert_eq!(listed(physical(&[&child_id, "a-id"])).await, ["a", "inner"]);
    assert!(listed(physical(&["nope"])).await.is_empty());
    assert!(
        listed(physical(&[&Uuid::now_v7().to_string()]))
            .await
            .is_empty()
    );
    assert_eq!(
        listed(ResourceFilter {
            statuses: strings(&["COMPLETE"]),
            ..physical(&[&child_id, "a-id"])
        })
        .await,
        ["a"]
    );
    // Another stack's resources are never listed.
    assert!(
        store
            .list_filtered_resources(child.id, &ResourceFilter::default())
            .await
            .expect("listed")
            .is_empty()
    );
}

/// Ten events after the stack's own: `web` (OS::Heat::None) at even
/// places, `db` (OS::Heat::RandomString) at odd ones; the first five
/// CREATE_IN_PROGRESS, the rest CREATE_COMPLETE. Their ids rise with their
/// place.
async fn events_fixture(store: &SqlStackStore) -> (Stack, Vec<Event>) {
    let stack = stack("app", None);
    insert(store, &stack, Vec::new()).await;
    let first = Uuid::now_v7().as_u128();
    let now = ember_runtime::time::now();
    let events: Vec<Event> = (0..10u128)
        .map(|place| {
            let web = place % 2 == 0;
            Event {
                id: Uuid::from_u128(first + place),
                stack_id: stack.id,
                resource_name: if web { "web" } else { "db" }.to_owned(),
                physical_resource_id: format!("physical-{place}"),
                resource_type: if web {
                    "OS::Heat::None"
                } else {
                    "OS::Heat::RandomString"
                }
                .to_owned(),
                action: StackAction::Create,
                status: if place < 5 {
                    ActionStatus::InProgress
                } else {
                    ActionStatus::Complete
                },
                reason: format!("event {place}"),
                created_at: now,
            }
        })
        .collect();
    store.record_events(&events).await.expect("recorded");
    (stack, events)
}

async fn events_filtered(store: &SqlStackStore, query: EventListQuery) -> Vec<String> {
    store
        .list_events(&query)
        .await
        .expect("listed")
        .into_iter()
        .map(|event| event.reason)
        .collect()
}

fn reasons(places: &[u32]) -> Vec<String> {
    places
        .iter()
        .map(|place| format!("event {place}"))
        .collect()
}

async fn events_filtered_by_each_filter_and_together(database: &TestDatabase) {
    let store = stack_support::stack_store(database).await;
    let (stack, _) = events_fixture(&store).await;
    let query = |filter: ResourceFilter| EventListQuery {
        stack_ids: vec![stack.id],
        filter,
        limit: 100,
        ..EventListQuery::default()
    };
    let by = |names: &[&str], types: &[&str], actions: &[&str], statuses: &[&str]| {
        query(ResourceFilter {
            names: strings(names),
            types: strings(types),
            actions: strings(actions),
            statuses: strings(statuses),
            physical_ids: Vec::new(),
        })
    };
    let everything = events_filtered(&store, query(ResourceFilter::default())).await;
    assert_eq!(everything.len(), 11, "{everything:?}");
    assert_eq!(everything[0], "Stack CREATE started");

    assert_eq!(
        events_filtered(&store, by(&["db"], &[], &[], &[])).await,
        reasons(&[1, 3, 5, 7, 9])
    );
    assert_eq!(
        events_filtered(&store, by(&["db", "web"], &[], &[], &[])).await,
        everything[1..]
    );
    assert_eq!(
        events_filtered(&store, by(&[], &["OS::Heat::None"], &[], &[])).await,
        reasons(&[0, 2, 4, 6, 8])
    );
    assert_eq!(
        events_filtered(&store, by(&[], &["OS::Heat::Stack"], &[], &[])).await,
        ["Stack CREATE started"]
    );
    assert_eq!(
        events_filtered(&store, by(&[], &[], &["CREATE"], &[])).await,
        everything
    );
    assert!(
        events_filtered(&store, by(&[], &[], &["UPDATE"], &[]))
            .await
            .is_empty()
    );
    assert_eq!(
        events_filtered(&store, by(&[], &[], &[], &["IN_PROGRESS"])).await,
        reasons(&[0, 1, 2, 3, 4])
    );
    assert_eq!(
        events_filtered(&store, by(&[], &[], &[], &["CREATE_IN_PROGRESS"])).await,
        reasons(&[0, 1, 2, 3, 4])
    );
    assert!(
        events_filtered(&store, by(&[], &[], &[], &["UPDATE_IN_PROGRESS"]))
            .await
            .is_empty()
    );
    // Different filters all apply.
    assert_eq!(
        events_filtered(
            &store,
            by(&[], &["OS::Heat::RandomString"], &[], &["COMPLETE"])
        )
        .await,
        reasons(&[5, 7, 9])
    );
    assert_eq!(
        events_filtered(
            &store,
            by(
                &["web"],
                &[],
                &["CREATE"],
                &["CREATE_IN_PROGRESS", "FAILED"]
            )
        )
        .await,
        reasons(&[0, 2, 4])
    );
    // With the resource a path names (`…/resources/db/events`).
    assert_eq!(
        events_filtered(
            &store,
            EventListQuery {
                resource_name: Some("db".to_owned()),
                ..by(&[], &[], &[], &["IN_PROGRESS"])
            }
        )
        .await,
        reasons(&[1, 3])
    );
}

async fn a_filtered_event_list_pages_with_a_marker_among_its_matches(database: &TestDatabase) {
    let store = stack_support::stack_store(database).await;
    let (stack, events) = events_fixture(&store).await;
    let page = |marker: Option<Uuid>, descending: bool| EventListQuery {
        stack_ids: vec![stack.id],
        filter: ResourceFilter {
            names: strings(&["web"]),
            ..ResourceFilter::default()
        },
        limit: 2,
        marker,
        descending,
        ..EventListQuery::default()
    };
    // A page holds `limit` matches, not `limit` rows read.
    assert_eq!(
        events_filtered(&store, page(None, false)).await,
        reasons(&[0, 2])
    );
    // The marker is the last match seen, and another resource's event may
    // be a marker too (Heat's client pages from any event id).
    assert_eq!(
        events_filtered(&store, page(Some(events[2].id), false)).await,
        reasons(&[4, 6])
    );
    assert_eq!(
        events_filtered(&store, page(Some(events[3].id), false)).await,
        reasons(&[4, 6])
    );
    assert_eq!(
        events_filtered(&store, page(Some(events[6].id), false)).await,
        reasons(&[8])
    );
    assert!(
        events_filtered(&store, page(Some(events[8].id), false))
            .await
            .is_empty()
    );
    // Newest first.
    assert_eq!(
        events_filtered(&store, page(None, true)).await,
        reasons(&[8, 6])
    );
    assert_eq!(
        events_filtered(&store, page(Some(events[6].id), true)).await,
        reasons(&[4, 2])
    );
    assert_eq!(
        events_filtered(&store, page(Some(events[2].id), true)).await,
        reasons(&[0])
    );
    // Two filters, paged.
    let complete_db = |marker: Option<Uuid>| EventListQuery {
        stack_ids: vec![stack.id],
        filter: ResourceFilter {
            names: strings(&["db"]),
            statuses: strings(&["COMPLETE"]),
            ..ResourceFilter::default()
        },
        limit: 2,
        marker,
        ..EventListQuery::default()
    };
    assert_eq!(
        events_filtered(&store, complete_db(None)).await,
        reasons(&[5, 7])
    );
    assert_eq!(
        events_filtered(&store, complete_db(Some(events[7].id))).await,
        reasons(&[9])
    );
}

ember_runtime::store_suite!(
    resources_filtered_by_each_filter_and_together,
    events_filtered_by_each_filter_and_together,
    a_filtered_event_list_pages_with_a_marker_among_its_matches,
);
