//! Heat's resource and event list filters as SQL: the values of one filter
//! are alternatives (`IN`, `OR`), the filters all apply (`AND`), so a page
//! of a filtered list is read as one query, limit and marker included.

use sea_orm::sea_query::Query;
use sea_orm::{ColumnTrait, Condition};
use uuid::Uuid;

use super::ResourceFilter;
use super::entity::{events, resources, stacks};

/// The columns a filter reads, in a table of resources or of events.
struct FilterColumns<C> {
    name: C,
    type_name: C,
    action: C,
    status: C,
    physical_id: C,
}

/// The condition for a table's columns: `TRUE` for an empty filter.
fn condition<C: ColumnTrait>(filter: &ResourceFilter, columns: FilterColumns<C>) -> Condition {
    let mut condition = Condition::all();
    if !filter.names.is_empty() {
        condition = condition.add(columns.name.is_in(filter.names.iter().cloned()));
    }
    if !filter.types.is_empty() {
        condition = condition.add(columns.type_name.is_in(filter.types.iter().cloned()));
    }
    if !filter.actions.is_empty() {
        condition = condition.add(columns.action.is_in(filter.actions.iter().cloned()));
    }
    if !filter.statuses.is_empty() {
        condition = condition.add(status_condition(
            &filter.statuses,
            columns.action,
            columns.status,
        ));
    }
    if !filter.physical_ids.is_empty() {
        condition = condition.add(
            columns
                .physical_id
                .is_in(filter.physical_ids.iter().cloned()),
        );
    }
    condition
}

/// Heat's status filter: each value is a status alone (`FAILED`) or an
/// action and its status (`CREATE_FAILED`, split at its first `_`: no
/// action has one).
fn status_condition<C: ColumnTrait>(wanted: &[String], action: C, status: C) -> Condition {
    let mut any = Condition::any().add(status.is_in(wanted.iter().cloned()));
    for value in wanted {
        if let Some((wanted_action, wanted_status)) = value.split_once('_') {
            any = any.add(
                Condition::all()
                    .add(action.eq(wanted_action))
                    .add(status.eq(wanted_status)),
            );
        }
    }
    any
}

/// The condition on the `events` table.
pub(super) fn events_condition(filter: &ResourceFilter) -> Condition {
    condition(
        filter,
        FilterColumns {
            name: events::Column::ResourceName,
            type_name: events::Column::ResourceType,
            action: events::Column::Action,
            status: events::Column::Status,
            physical_id: events::Column::PhysicalResourceId,
        },
    )
}

/// The condition on the `resources` of stack `stack_id`. A nested stack
/// resource whose physical id is not written yet is shown with its nested
/// stack's id (found by its parent resource's name), so a physical id
/// filter takes it by that id too.
pub(super) fn resources_condition(stack_id: Uuid, filter: &ResourceFilter) -> Condition {
    let mut physical = filter.clone();
    physical.physical_ids.clear();
    let mut condition = condition(
        &physical,
        FilterColumns {
            name: resources::Column::Name,
            type_name: resources::Column::TypeName,
            action: resources::Column::Action,
            status: resources::Column::Status,
            physical_id: resources::Column::PhysicalId,
        },
    );
    if !filter.physical_ids.is_empty() {
        let mut any = Condition::any()
            .add(resources::Column::PhysicalId.is_in(filter.physical_ids.iter().cloned()));
        let nested_ids: Vec<Uuid> = filter
            .physical_ids
            .iter()
            .filter_map(|id| Uuid::parse_str(id).ok())
            .collect();
        if !nested_ids.is_empty() {
            any = any.add(
                Condition::all()
                    .add(resources::Column::PhysicalId.is_null())
                    .add(
                        resources::Column::Name.in_subquery(
                            Query::select()
                                .column(stacks::Column::ParentResource)
                                .from(stacks::Entity)
                                .and_where(stacks::Column::ParentId.eq(stack_id))
                                .and_where(stacks::Column::DeletedAt.is_null())
                                .and_where(stacks::Column::Id.is_in(nested_ids))
                                .to_owned(),
                        ),
                    ),
            );
        }
        condition = condition.add(any);
    }
    condition
}
