//! What a list of pending actions asks for (project, cluster, paging), which
//! the application layer scopes to its caller and the store answers.

use uuid::Uuid;

pub const MAX_PAGE_SIZE: u32 = 1000;
pub const DEFAULT_PAGE_SIZE: u32 = 100;

/// Which pending actions to list, earliest deadline first.
#[derive(Debug, Clone, Default)]
pub struct PendingListQuery {
    /// `None` = every project (admins).
    pub project_id: Option<String>,
    pub cluster_id: Option<Uuid>,
    /// 0 = the default page size.
    pub limit: u32,
    /// Token of the last action of the previous page.
    pub marker: Option<Uuid>,
    /// Include resolved actions.
    pub include_resolved: bool,
}

impl PendingListQuery {
    pub fn page_size(&self) -> u32 {
        page_size(self.limit)
    }
}

/// The page size a `limit` asks for: 0 is the default, and no page is
/// larger than [`MAX_PAGE_SIZE`]. Every list of the service reads it.
pub fn page_size(limit: u32) -> u32 {
    match limit {
        0 => DEFAULT_PAGE_SIZE,
        limit => limit.min(MAX_PAGE_SIZE),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_limit_of_zero_is_the_default_page_and_none_exceeds_the_maximum() {
        assert_eq!(page_size(0), DEFAULT_PAGE_SIZE);
        assert_eq!(page_size(7), 7);
        assert_eq!(page_size(MAX_PAGE_SIZE + 1), MAX_PAGE_SIZE);
        let query = PendingListQuery {
            limit: 5_000,
            ..PendingListQuery::default()
        };
        assert_eq!(query.page_size(), MAX_PAGE_SIZE);
    }
}
