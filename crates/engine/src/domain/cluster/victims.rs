//! Which nodes a scale-in removes: never one protected from scale-in;
//! nodes in ERROR or WARNING and tainted nodes first (they are the ones an
//! operator wants gone), then the deletion policy's criteria.

use rand::seq::SliceRandom;

use super::policy::Criteria;
use super::{Node, NodeStatus};

/// Picks `count` victims among `nodes` (fewer if there are fewer
/// unprotected nodes).
/// `profile_created` gives each node's profile creation time order key.
pub fn select_victims(
    nodes: &[Node],
    count: usize,
    criteria: Criteria,
    profile_rank: impl Fn(&Node) -> i64,
) -> Vec<&Node> {
    let candidates: Vec<&Node> = nodes
        .iter()
        .filter(|node| node.status != NodeStatus::Deleting && !node.protected)
        .collect();
    let unhealthy = |node: &Node| {
        matches!(node.status, NodeStatus::Error | NodeStatus::Warning) || node.tainted
    };
    let (mut first, mut rest): (Vec<&Node>, Vec<&Node>) =
        candidates.into_iter().partition(|node| unhealthy(node));
    for group in [&mut first, &mut rest] {
        match criteria {
            Criteria::OldestFirst => group.sort_by_key(|node| (node.created_at, node.index)),
            Criteria::YoungestFirst => {
                group.sort_by_key(|node| std::cmp::Reverse((node.created_at, node.index)))
            }
            Criteria::OldestProfileFirst => {
                group.sort_by_key(|node| (profile_rank(node), node.created_at, node.index))
            }
            Criteria::Random => group.shuffle(&mut rand::rng()),
        }
    }
    first.into_iter().chain(rest).take(count).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::{Duration, Utc};
    use serde_json::Map;
    use uuid::Uuid;

    fn node(index: i32, status: NodeStatus, tainted: bool) -> Node {
        let now = Utc::now();
        Node {
            id: Uuid::now_v7(),
            name: format!("node-{index}"),
            cluster_id: None,
            profile_id: Uuid::nil(),
            index,
            role: String::new(),
            status,
            status_reason: String::new(),
            physical_id: None,
            tainted,
            protected: false,
            metadata: Map::new(),
            project_id: "p".into(),
            user_id: "u".into(),
            created_at: now + Duration::seconds(i64::from(index)),
            updated_at: now,
        }
    }

    #[test]
    fn unhealthy_and_tainted_nodes_go_first_then_criteria() {
        let nodes = vec![
            node(1, NodeStatus::Active, false),
            node(2, NodeStatus::Active, false),
            node(3, NodeStatus::Error, false),
            node(4, NodeStatus::Active, true),
            node(5, NodeStatus::Active, false),
        ];
        let oldest: Vec<i32> = select_victims(&nodes, 3, Criteria::OldestFirst, |_| 0)
            .iter()
            .map(|node| node.index)
            .collect();
        assert_eq!(oldest, vec![3, 4, 1]);
        let youngest: Vec<i32> = select_victims(&nodes, 3, Criteria::YoungestFirst, |_| 0)
            .iter()
            .map(|node| node.index)
            .collect();
        assert_eq!(youngest, vec![4, 3, 5]);
        assert_eq!(select_victims(&nodes, 9, Criteria::Random, |_| 0).len(), 5);
    }

    #[test]
    fn a_protected_node_is_never_chosen_even_when_failed_or_tainted() {
        let mut nodes = vec![
            node(1, NodeStatus::Active, false),
            node(2, NodeStatus::Error, true),
            node(3, NodeStatus::Active, false),
        ];
        nodes[1].protected = true;
        nodes[2].protected = true;
        let chosen: Vec<i32> = select_victims(&nodes, 3, Criteria::YoungestFirst, |_| 0)
            .iter()
            .map(|node| node.index)
            .collect();
        assert_eq!(chosen, vec![1]);
    }
}
