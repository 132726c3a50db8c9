//! What a list of clusters' objects asks for (Senlin's filters, sort
//! keys, paging): read by the API that parses a request and by the store
//! that answers it.

use uuid::Uuid;

use super::ActionStatus;
use crate::error::{Error, Result};

pub const PROFILE_SORT_KEYS: &[&str] = &["type", "name", "created_at", "updated_at"];
pub const POLICY_SORT_KEYS: &[&str] = PROFILE_SORT_KEYS;
pub const CLUSTER_SORT_KEYS: &[&str] = &["name", "status", "init_at", "created_at", "updated_at"];
pub const NODE_SORT_KEYS: &[&str] = &[
    "index",
    "name",
    "status",
    "init_at",
    "created_at",
    "updated_at",
];
pub const ACTION_SORT_KEYS: &[&str] = &["name", "target", "action", "created_at", "status"];
pub const EVENT_SORT_KEYS: &[&str] = &[
    "timestamp",
    "level",
    "otype",
    "oname",
    "action",
    "status",
    "oid",
    "cluster_id",
];

/// One key of a list's order (Senlin's `sort=name:desc`); ties are broken
/// by id, so a marker names one place in the order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SortKey {
    pub key: String,
    pub descending: bool,
}

impl SortKey {
    /// Senlin's `key[:asc|desc],…`, each key one of `allowed`.
    pub fn parse_list(text: &str, allowed: &[&str]) -> Result<Vec<SortKey>> {
        if text.is_empty() {
            return Ok(Vec::new());
        }
        text.split(',')
            .map(|item| {
                let (key, direction) = item.split_once(':').unwrap_or((item, ""));
                if !allowed.contains(&key) {
                    return Err(Error::InvalidInput(format!(
                        "Unsupported sort key '{key}' for 'sort'."
                    )));
                }
                let descending = match direction {
                    "" | "asc" => false,
                    "desc" => true,
                    other => {
                        return Err(Error::InvalidInput(format!(
                            "Unsupported sort dir '{other}' for 'sort'."
                        )));
                    }
                };
                Ok(SortKey {
                    key: key.to_owned(),
                    descending,
                })
            })
            .collect()
    }
}

/// A page of profiles, policies or clusters, oldest first unless sorted.
/// An empty filter list lets everything through; a filter with values keeps
/// the rows matching any one of them. Filters apply before paging.
#[derive(Debug, Clone, Default)]
pub struct ObjectQuery {
    /// `None` = every project (admins who asked for it).
    pub project_id: Option<String>,
    pub names: Vec<String>,
    /// Profile or policy types (`os.nova.server-1.0`).
    pub types: Vec<String>,
    /// Cluster statuses.
    pub statuses: Vec<String>,
    pub sort: Vec<SortKey>,
    /// 0 = 100; at most 1000.
    pub limit: u32,
    pub marker: Option<Uuid>,
}

impl ObjectQuery {
    pub fn page_size(&self) -> u64 {
        u64::from(match self.limit {
            0 => crate::domain::DEFAULT_PAGE_SIZE,
            limit => limit.min(crate::domain::MAX_PAGE_SIZE),
        })
    }
}

#[derive(Debug, Clone, Default)]
pub struct NodeQuery {
    pub project_id: Option<String>,
    pub cluster_id: Option<Uuid>,
    pub names: Vec<String>,
    pub statuses: Vec<String>,
    pub sort: Vec<SortKey>,
    pub limit: u32,
    pub marker: Option<Uuid>,
}

#[derive(Debug, Clone, Default)]
pub struct ActionQuery {
    pub project_id: Option<String>,
    pub cluster_id: Option<Uuid>,
    pub status: Option<ActionStatus>,
    /// More statuses (any of them, with `status`).
    pub statuses: Vec<ActionStatus>,
    pub names: Vec<String>,
    /// Action kinds (`CLUSTER_SCALE_OUT`).
    pub kinds: Vec<String>,
    pub targets: Vec<Uuid>,
    pub sort: Vec<SortKey>,
    pub limit: u32,
    pub marker: Option<Uuid>,
}

#[derive(Debug, Clone, Default)]
pub struct EventQuery {
    pub project_id: Option<String>,
    pub cluster_id: Option<Uuid>,
    pub obj_id: Option<String>,
    pub obj_types: Vec<String>,
    pub obj_names: Vec<String>,
    /// Action kinds the events record.
    pub actions: Vec<String>,
    pub levels: Vec<String>,
    pub sort: Vec<SortKey>,
    pub limit: u32,
    pub marker: Option<Uuid>,
}
