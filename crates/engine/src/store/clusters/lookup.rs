//! How a project's named objects (profiles, policies, clusters, nodes) are
//! found from what a caller typed, as Senlin finds them: names need not be
//! unique, so an identity is tried as an id, then as a name, then as the
//! start of an id (a "short id", what `openstack cluster list` prints).
//! More than one match is the caller's to resolve: a 400 with Senlin's
//! message, which its clients and API suite compare.

use sea_orm::{ColumnTrait, EntityTrait, QueryFilter, QuerySelect, Select};
use uuid::Uuid;

use crate::error::{Error, Result};

/// The tables of the objects a project names: each is found by id, name or
/// short id, and read a page at a time.
pub(super) trait NamedObjects: EntityTrait {
    const ID: Self::Column;
    const NAME: Self::Column;
    const PROJECT_ID: Self::Column;
}

/// Finds one row within a project (any project when `project_id` is None):
/// by id when `identity` is one (then by name, as Senlin does), otherwise
/// by name and then by short id. `None` when nothing matches.
pub(super) async fn find_by_name_or_id<E: NamedObjects>(
    reader: &ember_runtime::database::Reader,
    project_id: Option<&str>,
    identity: &str,
) -> Result<Option<E::Model>> {
    let scoped = || {
        let select = E::find();
        match project_id {
            Some(project_id) => select.filter(E::PROJECT_ID.eq(project_id)),
            None => select,
        }
    };
    if let Ok(id) = Uuid::parse_str(identity)
        && let Some(row) = scoped().filter(E::ID.eq(id)).one(reader).await?
    {
        return Ok(Some(row));
    }
    if let Some(row) = only_match(scoped().filter(E::NAME.eq(identity)), reader, identity).await? {
        return Ok(Some(row));
    }
    if Uuid::parse_str(identity).is_ok() {
        return Ok(None);
    }
    match short_id_range(identity) {
        Some((first, last)) => {
            only_match(
                scoped().filter(E::ID.between(first, last)),
                reader,
                identity,
            )
            .await
        }
        None => Ok(None),
    }
}

/// The one row `select` finds, none, or Senlin's "multiple choices".
async fn only_match<E: EntityTrait>(
    select: Select<E>,
    reader: &ember_runtime::database::Reader,
    identity: &str,
) -> Result<Option<E::Model>> {
    let mut rows = select.limit(2).all(reader).await?;
    if rows.len() > 1 {
        return Err(multiple_choices(identity));
    }
    Ok(rows.pop())
}

/// Senlin's `MultipleChoices`: a 400 (its fault map says so, whatever the
/// name suggests).
pub fn multiple_choices(identity: &str) -> Error {
    Error::InvalidInput(format!(
        "Multiple results found matching the query criteria '{identity}'. Please be more specific."
    ))
}

/// The ids whose text form (`8-4-4-4-12` lowercase hex) starts with
/// `prefix`: the first and last of that range, or `None` when no id can
/// (an empty prefix, a character that is not hex where the text has a hex
/// digit, a hyphen out of place, too long). Ids compare as their 16 bytes
/// in both backends (PostgreSQL's `uuid`, SQLite's blob), the order a
/// 128-bit number has, so a prefix is one `BETWEEN`.
pub fn short_id_range(prefix: &str) -> Option<(Uuid, Uuid)> {
    const HYPHENS: [usize; 4] = [8, 13, 18, 23];
    if prefix.is_empty() || prefix.len() > 36 {
        return None;
    }
    let mut digits = 0u32;
    let mut value = 0u128;
    for (position, character) in prefix.chars().enumerate() {
        if HYPHENS.contains(&position) {
            if character != '-' {
                return None;
            }
            continue;
        }
        value = (value << 4) | u128::from(character.to_digit(16)?);
        digits += 1;
    }
    let free_bits = 4 * (32 - digits);
    let first = value.checked_shl(free_bits).unwrap_or(0);
    let last = first | u128::MAX.checked_shr(4 * digits).unwrap_or(0);
    Some((Uuid::from_u128(first), Uuid::from_u128(last)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_short_id_covers_the_ids_starting_with_it() {
        let (first, last) = short_id_range("01a2164").expect("a range");
        assert_eq!(first.to_string(), "01a21640-0000-0000-0000-000000000000");
        assert_eq!(last.to_string(), "01a2164f-ffff-ffff-ffff-ffffffffffff");
        let (first, last) = short_id_range("01a21644-c9").expect("a range");
        assert_eq!(first.to_string(), "01a21644-c900-0000-0000-000000000000");
        assert_eq!(last.to_string(), "01a21644-c9ff-ffff-ffff-ffffffffffff");
    }

    #[test]
    fn a_whole_id_is_a_range_of_one_and_case_does_not_matter() {
        let id = "01A21644-C976-7070-A7A3-3EEDA3E550C7";
        let (first, last) = short_id_range(id).expect("a range");
        assert_eq!(first, last);
        assert_eq!(first, Uuid::parse_str(id).expect("an id"));
    }

    #[test]
    fn what_no_id_starts_with_has_no_range() {
        for text in [
            "",
            "web",
            "01a21644c9",
            "01a2-",
            "01a21644-c976-7070-a7a3-3eeda3e550c7f",
        ] {
            assert_eq!(short_id_range(text), None, "{text:?}");
        }
    }
}
