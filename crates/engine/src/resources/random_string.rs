//! `OS::Heat::RandomString`: a random string of a given length drawn from
//! character classes and sequences, each with a minimum count. `get_resource`
//! and the `value` attribute return the string, as in Heat.

use async_trait::async_trait;
use rand::Rng;
use rand::seq::SliceRandom;
use serde_json::{Map, Value, json};

use super::{
    AttributeSchema, PropertySchema, PropertyType, ResourceFailure, ResourceOutcome,
    ResourceRequest, ResourceType, ResourceTypeSchema,
};
use crate::domain::Resource;

pub struct RandomString {
    schema: ResourceTypeSchema,
}

impl RandomString {
    pub fn new() -> Self {
        RandomString {
            schema: ResourceTypeSchema {
                type_name: "OS::Heat::RandomString",
                description: "Generates a random string.",
                properties: vec![
                    PropertySchema::new("length", PropertyType::Integer, "Length of the string.")
                        .default(json!(32))
                        .range(1.0, 512.0),
                    PropertySchema::new(
                        "character_classes",
                        PropertyType::List,
                        "Classes to draw from: [{class: lettersdigits|letters|lowercase|uppercase|digits|hexdigits|octdigits, min: N}].",
                    ),
                    PropertySchema::new(
                        "character_sequences",
                        PropertyType::List,
                        "Literal sequences to draw from: [{sequence: \"!@#\", min: N}].",
                    ),
                    PropertySchema::new(
                        "salt",
                        PropertyType::String,
                        "Change it to get a new string on update.",
                    ),
                ],
                attributes: vec![AttributeSchema {
                    name: "value",
                    description: "The random string.",
                }],
                accepts_any_properties: false,
                accepts_any_attributes: false,
            },
        }
    }
}

fn class_characters(class: &str) -> Option<&'static str> {
    const LOWER: &str = "abcdefghijklmnopqrstuvwxyz";
    const UPPER: &str = "ABCDEFGHIJKLMNOPQRSTUVWXYZ";
    const DIGITS: &str = "0123456789";
    Some(match class {
        "lettersdigits" => "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789",
        "letters" => "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ",
        "lowercase" => LOWER,
        "uppercase" => UPPER,
        "digits" => DIGITS,
        "hexdigits" => "0123456789abcdefABCDEF",
        "octdigits" => "01234567",
        _ => return None,
    })
}

/// (characters to draw from, minimum count) for each class and sequence.
fn pools(properties: &Map<String, Value>) -> Result<Vec<(Vec<char>, usize)>, ResourceFailure> {
    let minimum = |entry: &Map<String, Value>, path: &str| -> Result<usize, ResourceFailure> {
        match entry.get("min") {
            None => Ok(1),
            Some(value) => value
                .as_u64()
                .and_then(|min| usize::try_from(min).ok())
                .filter(|min| *min <= 512)
                .ok_or_else(|| {
                    ResourceFailure::new(format!("{path}.min must be an integer 0-512"))
                }),
        }
    };
    let mut pools = Vec::new();
    for (index, entry) in list(properties, "character_classes")?.iter().enumerate() {
        let path = format!("character_classes[{index}]");
        let entry = entry.as_object().ok_or_else(|| {
            ResourceFailure::new(format!("{path} must be a map with class and min"))
        })?;
        let class = entry
            .get("class")
            .and_then(Value::as_str)
            .unwrap_or("lettersdigits");
        let characters = class_characters(class).ok_or_else(|| {
            ResourceFailure::new(format!(
                "{path}.class {class:?} is not one of lettersdigits, letters, lowercase, uppercase, digits, hexdigits, octdigits"
            ))
        })?;
        pools.push((characters.chars().collect(), minimum(entry, &path)?));
    }
    for (index, entry) in list(properties, "character_sequences")?.iter().enumerate() {
        let path = format!("character_sequences[{index}]");
        let entry = entry.as_object().ok_or_else(|| {
            ResourceFailure::new(format!("{path} must be a map with sequence and min"))
        })?;
        let sequence = entry
            .get("sequence")
            .and_then(Value::as_str)
            .filter(|sequence| !sequence.is_empty())
            .ok_or_else(|| {
                ResourceFailure::new(format!("{path}.sequence must be a non-empty string"))
            })?;
        pools.push((sequence.chars().collect(), minimum(entry, &path)?));
    }
    if pools.is_empty() {
        pools.push((
            class_characters("lettersdigits")
                .unwrap_or_default()
                .chars()
                .collect(),
            0,
        ));
    }
    Ok(pools)
}

fn list(properties: &Map<String, Value>, key: &str) -> Result<Vec<Value>, ResourceFailure> {
    match properties.get(key) {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Array(items)) => Ok(items.clone()),
        Some(_) => Err(ResourceFailure::new(format!("{key} must be a list"))),
    }
}

/// A random string honouring every minimum, the rest drawn from all pools.
pub fn generate(properties: &Map<String, Value>) -> Result<String, ResourceFailure> {
    let length = properties
        .get("length")
        .and_then(Value::as_u64)
        .and_then(|length| usize::try_from(length).ok())
        .unwrap_or(32);
    let pools = pools(properties)?;
    let required: usize = pools.iter().map(|(_, min)| min).sum();
    if required > length {
        return Err(ResourceFailure::new(format!(
            "length {length} is shorter than the {required} characters the minimums require"
        )));
    }
    let mut rng = rand::rng();
    let mut characters = Vec::with_capacity(length);
    for (pool, min) in &pools {
        for _ in 0..*min {
            characters.push(pool[rng.random_range(0..pool.len())]);
        }
    }
    let all: Vec<char> = pools
        .iter()
        .flat_map(|(pool, _)| pool.iter().copied())
        .collect();
    while characters.len() < length {
        characters.push(all[rng.random_range(0..all.len())]);
    }
    characters.shuffle(&mut rng);
    Ok(characters.into_iter().collect())
}

#[async_trait]
impl ResourceType for RandomString {
    fn schema(&self) -> &ResourceTypeSchema {
        &self.schema
    }

    fn acts_outside_its_row(&self) -> bool {
        false
    }

    async fn create(&self, request: &ResourceRequest) -> Result<ResourceOutcome, ResourceFailure> {
        let value = generate(&request.properties)?;
        let mut attributes = Map::new();
        attributes.insert("value".to_owned(), Value::String(value.clone()));
        Ok(ResourceOutcome {
            physical_id: request.physical_resource_name(),
            attributes,
            data: json!({ "value": value }),
        })
    }

    fn reference(&self, current: &Resource) -> Value {
        current.data.get("value").cloned().unwrap_or(Value::Null)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn properties(value: Value) -> Map<String, Value> {
        value.as_object().cloned().unwrap_or_default()
    }

    #[test]
    fn length_and_minimums_are_honoured() {
        let value = generate(&properties(json!({
            "length": 20,
            "character_classes": [{"class": "digits", "min": 5}, {"class": "uppercase", "min": 5}],
            "character_sequences": [{"sequence": "!@", "min": 2}],
        })))
        .expect("generated");
        assert_eq!(value.chars().count(), 20);
        assert!(value.chars().filter(char::is_ascii_digit).count() >= 5);
        assert!(value.chars().filter(char::is_ascii_uppercase).count() >= 5);
        assert!(value.chars().filter(|c| "!@".contains(*c)).count() >= 2);
        assert!(
            value
                .chars()
                .all(|c| c.is_ascii_digit() || c.is_ascii_uppercase() || "!@".contains(c))
        );
    }

    #[test]
    fn default_is_32_letters_and_digits() {
        let value = generate(&Map::new()).expect("generated");
        assert_eq!(value.len(), 32);
        assert!(value.chars().all(|c| c.is_ascii_alphanumeric()));
    }

    #[test]
    fn impossible_or_bad_requests_are_refused() {
        let too_many = generate(&properties(
            json!({"length": 3, "character_classes": [{"class": "digits", "min": 4}]}),
        ));
        assert!(
            too_many
                .expect_err("refused")
                .to_string()
                .contains("shorter than")
        );
        let bad_class = generate(&properties(
            json!({"character_classes": [{"class": "emoji"}]}),
        ));
        assert!(
            bad_class
                .expect_err("refused")
                .to_string()
                .contains("\"emoji\"")
        );
        let empty_sequence = generate(&properties(
            json!({"character_sequences": [{"sequence": ""}]}),
        ));
        assert!(
            empty_sequence
                .expect_err("refused")
                .to_string()
                .contains("sequence")
        );
    }
}
