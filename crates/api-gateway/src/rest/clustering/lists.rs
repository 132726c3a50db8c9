//! The query parameters of Senlin's list calls, checked as Senlin checks
//! them and in its order: an unknown parameter first, then
//! `global_project` (a strict `true`/`false`), then `limit`, `marker`,
//! `sort` and enumerated filters (`status`, `level`, `action`), each with
//! Senlin's own message — clients and Senlin's API suite compare them.
//! Filters may repeat (`?status=ACTIVE&status=ERROR`: either one); the
//! engine applies them before it pages, so a page is never short because
//! the gateway dropped rows from it.
//!
//! A list without `limit` answers everything up to the engine's largest
//! page (1000), as Senlin answers everything: Senlin never sends links,
//! and its clients read a body with one key as the list itself, so the
//! answer stays `{"<key>": [...]}`. A full page (as many objects as the
//! `limit` asked, or 1000) carries the link to the next one, as Nova's
//! lists do and openstacksdk follows (`<resources_key>_links`):
//! `"clusters_links": [{"href": "<the same URL, marker = the page's last
//! id>", "rel": "next"}]` — [`paged`] renders every list that pages.

use std::convert::Infallible;

use axum::extract::{FromRequestParts, OriginalUri};
use axum::response::{IntoResponse, Response};
use http::request::Parts;
use serde::ser::{Serialize, SerializeMap, Serializer};
use serde_json::{Value, json};

use super::bad_request;
use crate::GatewayState;
use crate::error::RestError;
use crate::rest::orchestration::PublicOrigin;

/// The engine's page for `limit` 0 and its largest page (its
/// `store::DEFAULT_PAGE_SIZE` and `MAX_PAGE_SIZE`); a list without
/// `limit` asks for the largest.
const ENGINE_DEFAULT_PAGE: u32 = 100;
const ENGINE_MAX_PAGE: u32 = 1000;

/// The parameters every list takes besides its filters.
const PAGING: &[&str] = &["limit", "marker", "sort", "global_project"];

/// What one Senlin list call accepts.
pub struct ListRules {
    /// Its filters (besides limit, marker, sort and global_project).
    pub filters: &'static [&'static str],
    /// The keys `sort` may name (`key[:asc|desc]`, comma-separated).
    pub sort_keys: &'static [&'static str],
    /// The values an enumerated filter may take.
    pub enumerated: &'static [(&'static str, &'static [&'static str])],
    /// Senlin's clusters list quotes an unknown parameter's name
    /// (`Invalid parameter 'bogus'`); its other lists do not.
    pub quote_unknown: bool,
}

/// Senlin's cluster statuses.
pub const CLUSTER_STATUSES: &[&str] = &[
    "INIT",
    "ACTIVE",
    "CREATING",
    "UPDATING",
    "RESIZING",
    "DELETING",
    "CHECKING",
    "RECOVERING",
    "CRITICAL",
    "ERROR",
    "WARNING",
    "OPERATING",
];

/// Senlin's node statuses.
pub const NODE_STATUSES: &[&str] = &[
    "INIT",
    "ACTIVE",
    "ERROR",
    "WARNING",
    "CREATING",
    "UPDATING",
    "DELETING",
    "RECOVERING",
    "OPERATING",
];

/// Senlin's action statuses.
pub const ACTION_STATUSES: &[&str] = &[
    "INIT",
    "WAITING",
    "READY",
    "RUNNING",
    "SUCCEEDED",
    "FAILED",
    "CANCELLED",
    "WAITING_LIFECYCLE_COMPLETION",
    "SUSPENDED",
];

/// Senlin's action names (cluster and node actions).
pub const ACTION_NAMES: &[&str] = &[
    "CLUSTER_CREATE",
    "CLUSTER_DELETE",
    "CLUSTER_UPDATE",
    "CLUSTER_ADD_NODES",
    "CLUSTER_DEL_NODES",
    "CLUSTER_RESIZE",
    "CLUSTER_CHECK",
    "CLUSTER_RECOVER",
    "CLUSTER_REPLACE_NODES",
    "CLUSTER_SCALE_OUT",
    "CLUSTER_SCALE_IN",
    "CLUSTER_ATTACH_POLICY",
    "CLUSTER_DETACH_POLICY",
    "CLUSTER_UPDATE_POLICY",
    "CLUSTER_OPERATION",
    "NODE_CREATE",
    "NODE_DELETE",
    "NODE_UPDATE",
    "NODE_JOIN",
    "NODE_LEAVE",
    "NODE_CHECK",
    "NODE_RECOVER",
    "NODE_OPERATION",
];

/// Senlin's event levels.
pub const EVENT_LEVELS: &[&str] = &["CRITICAL", "ERROR", "WARN", "INFO", "DEBUG"];

/// Checked list parameters.
#[derive(Debug, Default, PartialEq)]
pub struct ListQuery {
    /// As asked (0 = the engine's default page); without `limit`, the
    /// engine's largest page.
    pub limit: u32,
    pub marker: String,
    pub sort: String,
    /// Every project's objects (admins only; the engine refuses others).
    pub global_project: bool,
    filters: Vec<(String, String)>,
}

impl ListQuery {
    /// Checks `pairs` (the query string, in order, repeats kept).
    pub fn parse(pairs: &[(String, String)], rules: &ListRules) -> Result<ListQuery, RestError> {
        if let Some((unknown, _)) = pairs.iter().find(|(key, _)| {
            !PAGING.contains(&key.as_str()) && !rules.filters.contains(&key.as_str())
        }) {
            return Err(bad_request(if rules.quote_unknown {
                format!("Invalid parameter '{unknown}'")
            } else {
                format!("Invalid parameter {unknown}")
            }));
        }
        let single = |name: &str| {
            pairs
                .iter()
                .find(|(key, _)| key == name)
                .map(|(_, value)| value.as_str())
        };
        let global_project = match single("global_project") {
            None => false,
            Some(text) => parse_bool("global_project", text)?,
        };
        let limit = single("limit")
            .map(parse_limit)
            .transpose()?
            .unwrap_or(ENGINE_MAX_PAGE);
        let marker = match single("marker") {
            None => String::new(),
            Some(text) => {
                uuid::Uuid::parse_str(text).map_err(|_| {
                    bad_request(format!(
                        "The value for marker is not a valid UUID: '{text}'."
                    ))
                })?;
                text.to_owned()
            }
        };
        let sort = match single("sort") {
            None => String::new(),
            Some(text) => {
                check_sort(text, rules.sort_keys)?;
                text.to_owned()
            }
        };
        let filters: Vec<(String, String)> = pairs
            .iter()
            .filter(|(key, _)| !PAGING.contains(&key.as_str()))
            .cloned()
            .collect();
        for (key, value) in &filters {
            let allowed = rules
                .enumerated
                .iter()
                .find(|(name, _)| name == key)
                .map(|(_, values)| *values);
            if allowed.is_some_and(|values| !values.contains(&value.as_str())) {
                return Err(bad_request(format!("Field value {value} is invalid")));
            }
        }
        Ok(ListQuery {
            limit,
            marker,
            sort,
            global_project,
            filters,
        })
    }

    /// Every value given for `name`, in order.
    pub fn values(&self, name: &str) -> Vec<String> {
        self.filters
            .iter()
            .filter(|(key, _)| key == name)
            .map(|(_, value)| value.clone())
            .collect()
    }

    /// The first value given for `name` (Senlin's "single" filters), or "".
    pub fn first(&self, name: &str) -> String {
        self.values(name).into_iter().next().unwrap_or_default()
    }
}

/// Where a list was asked for, to link its next page: the gateway as the
/// caller reached it (the configured public URL, else the request's
/// scheme and host, honouring a proxy's `X-Forwarded-*`), the list's path
/// and its query string as sent.
pub struct ListLocation {
    url: String,
    query: String,
}

impl FromRequestParts<GatewayState> for ListLocation {
    type Rejection = Infallible;

    async fn from_request_parts(
        parts: &mut Parts,
        state: &GatewayState,
    ) -> Result<Self, Infallible> {
        let origin = if state.identity.public_url.is_empty() {
            let Ok(PublicOrigin(origin)) = PublicOrigin::from_request_parts(parts, state).await;
            origin
        } else {
            state.identity.public_url.trim_end_matches('/').to_owned()
        };
        // The router is nested under the API's prefix: the original URI
        // has the whole path.
        let uri = parts
            .extensions
            .get::<OriginalUri>()
            .map_or_else(|| parts.uri.clone(), |original| original.0.clone());
        Ok(ListLocation {
            url: format!("{origin}{}", uri.path()),
            query: uri.query().unwrap_or_default().to_owned(),
        })
    }
}

impl ListLocation {
    /// The URL of the page after `marker`: every parameter kept as sent,
    /// `marker` replaced.
    pub fn next_page(&self, marker: &str) -> String {
        let mut pairs: Vec<String> = self
            .query
            .split('&')
            .filter(|pair| !pair.is_empty())
            .filter(|pair| pair.split('=').next() != Some("marker"))
            .map(str::to_owned)
            .collect();
        pairs.push(format!("marker={marker}"));
        format!("{}?{}", self.url, pairs.join("&"))
    }
}

/// How many objects the engine returns at most for `limit`.
fn engine_page(limit: u32) -> usize {
    let page = match limit {
        0 => ENGINE_DEFAULT_PAGE,
        limit => limit.min(ENGINE_MAX_PAGE),
    };
    usize::try_from(page).unwrap_or(usize::MAX)
}

/// A list answer, `{"<key>": [each object in its Senlin view]}`, and when
/// the page is full (more may follow) `"<key>_links"` with the `next`
/// page's URL, its marker the last object's `id`. The views are written
/// into the answer as they are made, not gathered into a JSON tree.
pub fn paged<'a, T, V: Serialize>(
    key: &str,
    objects: &'a [T],
    view: impl Fn(&'a T) -> V,
    id: impl Fn(&'a T) -> &'a str,
    limit: u32,
    location: &ListLocation,
) -> Response {
    let next = (objects.len() == engine_page(limit))
        .then(|| objects.last().map(|last| location.next_page(id(last))))
        .flatten();
    let page = Page {
        key,
        objects,
        view,
        links: next.map(|href| json!([{"href": href, "rel": "next"}])),
    };
    // Written into one buffer sized for the page (a list of 200 clusters
    // is ~300 KB): serde_json's writer into a `Vec` is its fast path, where
    // `Json`'s growing `BytesMut` writer costs a capacity check per write
    // and reallocations as the answer grows.
    let mut body = Vec::with_capacity(objects.len().saturating_mul(PAGE_BYTES_PER_OBJECT) + 64);
    match serde_json::to_writer(&mut body, &page) {
        Ok(()) => (
            [(
                http::header::CONTENT_TYPE,
                http::HeaderValue::from_static("application/json"),
            )],
            body,
        )
            .into_response(),
        Err(error) => RestError::new(
            ember_runtime::ErrorKind::Internal,
            format!("the list could not be written: {error}"),
        )
        .into_response(),
    }
}

/// What one object of a list takes in its answer, about (a cluster with
/// 25 members ~1.5 KB, a node ~0.7 KB): the buffer's first size.
const PAGE_BYTES_PER_OBJECT: usize = 1024;

struct Page<'k, 'a, T, F> {
    key: &'k str,
    objects: &'a [T],
    view: F,
    links: Option<Value>,
}

impl<'a, T, V: Serialize, F: Fn(&'a T) -> V> Serialize for Page<'_, 'a, T, F> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(1 + usize::from(self.links.is_some())))?;
        map.serialize_entry(self.key, &Views(self))?;
        if let Some(links) = &self.links {
            map.serialize_entry(&format!("{}_links", self.key), links)?;
        }
        map.end()
    }
}

struct Views<'p, 'k, 'a, T, F>(&'p Page<'k, 'a, T, F>);

impl<'a, T, V: Serialize, F: Fn(&'a T) -> V> Serialize for Views<'_, '_, 'a, T, F> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_seq(self.0.objects.iter().map(&self.0.view))
    }
}

/// Senlin's strict boolean for query parameters (`true`/`false`, any case).
pub fn parse_bool(name: &str, text: &str) -> Result<bool, RestError> {
    match text.to_ascii_lowercase().as_str() {
        "true" => Ok(true),
        "false" => Ok(false),
        _ => Err(bad_request(format!(
            "Invalid value '{text}' specified for '{name}'"
        ))),
    }
}

/// A non-negative integer, as Python's `int()` reads it; larger than a
/// page can be is capped by the engine.
fn parse_limit(text: &str) -> Result<u32, RestError> {
    let number: i64 = text
        .trim()
        .parse()
        .map_err(|_| bad_request(format!("The value for limit must be an integer: '{text}'.")))?;
    if number < 0 {
        return Err(bad_request("Value must be >= 0 for field 'limit'."));
    }
    Ok(u32::try_from(number).unwrap_or(u32::MAX))
}

/// `key[:dir]` items, comma-separated; a bad direction is reported over a
/// bad key of the same item, as Senlin does.
fn check_sort(text: &str, keys: &[&str]) -> Result<(), RestError> {
    for item in text.split(',') {
        let (key, direction) = item.split_once(':').unwrap_or((item, ""));
        if key.is_empty() {
            return Err(bad_request("Missing sort key for 'sort'."));
        }
        if !direction.is_empty() && direction != "asc" && direction != "desc" {
            return Err(bad_request(format!(
                "Unsupported sort dir '{direction}' for 'sort'."
            )));
        }
        if !keys.contains(&key) {
            return Err(bad_request(format!(
                "Unsupported sort key '{key}' for 'sort'."
            )));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const RULES: ListRules = ListRules {
        filters: &["name", "status"],
        sort_keys: &["name", "status", "created_at"],
        enumerated: &[("status", CLUSTER_STATUSES)],
        quote_unknown: false,
    };

    fn pairs(items: &[(&str, &str)]) -> Vec<(String, String)> {
        items
            .iter()
            .map(|(key, value)| ((*key).to_owned(), (*value).to_owned()))
            .collect()
    }

    fn refused(items: &[(&str, &str)], rules: &ListRules) -> String {
        ListQuery::parse(&pairs(items), rules)
            .unwrap_err()
            .message()
            .to_owned()
    }

    #[test]
    fn senlins_messages_for_each_bad_parameter() {
        assert_eq!(
            refused(&[("bogus", "foo")], &RULES),
            "Invalid parameter bogus"
        );
        let quoting = ListRules {
            quote_unknown: true,
            ..RULES
        };
        assert_eq!(
            refused(&[("bogus", "foo")], &quoting),
            "Invalid parameter 'bogus'"
        );
        assert_eq!(
            refused(&[("limit", "not-int")], &RULES),
            "The value for limit must be an integer: 'not-int'."
        );
        assert_eq!(
            refused(&[("limit", "-5")], &RULES),
            "Value must be >= 0 for field 'limit'."
        );
        assert_eq!(
            refused(&[("marker", "bad-marker")], &RULES),
            "The value for marker is not a valid UUID: 'bad-marker'."
        );
        assert_eq!(
            refused(&[("sort", "bad-sort")], &RULES),
            "Unsupported sort key 'bad-sort' for 'sort'."
        );
        assert_eq!(
            refused(&[("sort", "name:sideways")], &RULES),
            "Unsupported sort dir 'sideways' for 'sort'."
        );
        assert_eq!(
            refused(&[("sort", ":asc")], &RULES),
            "Missing sort key for 'sort'."
        );
        assert_eq!(
            refused(&[("global_project", "not-bool")], &RULES),
            "Invalid value 'not-bool' specified for 'global_project'"
        );
        assert_eq!(
            refused(&[("status", "['bad-status']")], &RULES),
            "Field value ['bad-status'] is invalid"
        );
    }

    async fn body(response: Response) -> Value {
        let bytes = axum::body::to_bytes(response.into_body(), usize::MAX)
            .await
            .expect("a body");
        serde_json::from_slice(&bytes).expect("JSON")
    }

    #[tokio::test]
    async fn a_full_page_links_the_next_with_every_other_parameter_kept() {
        let location = ListLocation {
            url: "http://gw:8004/clustering/v1/clusters".into(),
            query: "limit=2&status=ACTIVE&marker=old&sort=name:desc".into(),
        };
        let ids = ["a", "b"];
        let view = |id: &&str| json!({"id": id});
        fn id<'a>(id: &&'a str) -> &'a str {
            id
        }
        let full = body(paged("clusters", &ids, view, id, 2, &location)).await;
        assert_eq!(
            full["clusters_links"],
            json!([{
                "href": "http://gw:8004/clustering/v1/clusters?limit=2&status=ACTIVE&sort=name:desc&marker=b",
                "rel": "next",
            }])
        );
        let short = body(paged("clusters", &ids[..1], view, id, 2, &location)).await;
        assert!(short.get("clusters_links").is_none());
        assert_eq!(short["clusters"], json!([{"id": "a"}]));
        // `limit=0`: the engine's default page of 100.
        assert_eq!(engine_page(0), 100);
        assert_eq!(engine_page(5000), 1000);
        let bare = ListLocation {
            url: "/clustering/v1/nodes".into(),
            query: String::new(),
        };
        assert_eq!(bare.next_page("x"), "/clustering/v1/nodes?marker=x");
    }

    #[test]
    fn an_unknown_parameter_is_reported_before_a_bad_value() {
        assert_eq!(
            refused(&[("limit", "x"), ("bogus", "1")], &RULES),
            "Invalid parameter bogus"
        );
    }

    #[test]
    fn good_parameters_are_kept_with_repeated_filters() {
        let query = ListQuery::parse(
            &pairs(&[
                ("limit", "5"),
                ("marker", "0195b1c4-8f5e-7d2a-9c1e-3f4a5b6c7d8e"),
                ("sort", "name:desc,created_at"),
                ("global_project", "True"),
                ("status", "ACTIVE"),
                ("status", "ERROR"),
                ("name", "web"),
            ]),
            &RULES,
        )
        .unwrap();
        assert_eq!(query.limit, 5);
        assert_eq!(query.marker, "0195b1c4-8f5e-7d2a-9c1e-3f4a5b6c7d8e");
        assert_eq!(query.sort, "name:desc,created_at");
        assert!(query.global_project);
        assert_eq!(query.values("status"), ["ACTIVE", "ERROR"]);
        assert_eq!(query.first("name"), "web");
        assert_eq!(query.first("absent"), "");
        // No limit: everything up to the engine's largest page, as Senlin
        // answers everything (a link only if even that page is full).
        let none = ListQuery::parse(&[], &RULES).unwrap();
        assert_eq!(
            none,
            ListQuery {
                limit: 1000,
                ..ListQuery::default()
            }
        );
    }
}
