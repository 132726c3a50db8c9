//! Recently parsed stored definitions, so a run does not parse a stack's
//! definition again while it has not changed.

use std::sync::{Arc, Mutex};

use uuid::Uuid;

use crate::stacks::definition::ParsedStack;

/// Parsed stored definitions by stack and the
/// [`definition_version`](crate::domain::Stack::definition_version) they
/// were parsed from; at most [`PARSED_CACHE_STACKS`] (then emptied: cheap,
/// and a busy engine refills it with what is read now).
#[derive(Default)]
pub struct ParsedCache(Mutex<std::collections::HashMap<Uuid, ParsedAt>>);

/// A parsed definition and the version it was parsed from.
type ParsedAt = (i64, Arc<ParsedStack>);

/// How many stacks' parsed definitions are kept.
const PARSED_CACHE_STACKS: usize = 256;

impl ParsedCache {
    pub fn get(&self, stack_id: Uuid, version: i64) -> Option<Arc<ParsedStack>> {
        let cache = self.0.lock().ok()?;
        cache
            .get(&stack_id)
            .filter(|(parsed_from, _)| *parsed_from == version)
            .map(|(_, parsed)| parsed.clone())
    }

    pub fn put(&self, stack_id: Uuid, version: i64, parsed: Arc<ParsedStack>) {
        if let Ok(mut cache) = self.0.lock() {
            if cache.len() >= PARSED_CACHE_STACKS && !cache.contains_key(&stack_id) {
                cache.clear();
            }
            cache.insert(stack_id, (version, parsed));
        }
    }
}
