//! Property and attribute schemas, and the validation of resolved
//! properties against them (with Heat's coercions: "3" is an integer,
//! "true" a boolean, "a,b" a list).

use serde_json::{Map, Number, Value, json};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PropertyType {
    String,
    Integer,
    Number,
    Boolean,
    Map,
    List,
    /// Any JSON value.
    Any,
}

impl PropertyType {
    pub fn as_str(self) -> &'static str {
        match self {
            PropertyType::String => "string",
            PropertyType::Integer => "integer",
            PropertyType::Number => "number",
            PropertyType::Boolean => "boolean",
            PropertyType::Map => "map",
            PropertyType::List => "list",
            PropertyType::Any => "any",
        }
    }
}

#[derive(Debug, Clone)]
pub struct PropertySchema {
    pub name: &'static str,
    pub kind: PropertyType,
    pub description: &'static str,
    pub required: bool,
    pub default: Option<Value>,
    /// A change is applied in place; otherwise the resource is replaced.
    pub update_allowed: bool,
    /// Inclusive bounds for numbers, or for the length of strings and lists.
    pub range: Option<(f64, f64)>,
    pub allowed_values: Option<Vec<Value>>,
    /// Older names templates still use for it (Heat's hidden, translated
    /// properties: a port's `network_id` is its `network`).
    pub aliases: &'static [&'static str],
}

impl PropertySchema {
    pub fn new(name: &'static str, kind: PropertyType, description: &'static str) -> Self {
        PropertySchema {
            name,
            kind,
            description,
            required: false,
            default: None,
            update_allowed: false,
            range: None,
            allowed_values: None,
            aliases: &[],
        }
    }

    /// The older names of this property (see [`PropertySchema::aliases`]).
    pub fn aliases(mut self, aliases: &'static [&'static str]) -> Self {
        self.aliases = aliases;
        self
    }

    pub fn required(mut self) -> Self {
        self.required = true;
        self
    }

    pub fn default(mut self, value: Value) -> Self {
        self.default = Some(value);
        self
    }

    pub fn update_allowed(mut self) -> Self {
        self.update_allowed = true;
        self
    }

    pub fn range(mut self, minimum: f64, maximum: f64) -> Self {
        self.range = Some((minimum, maximum));
        self
    }

    pub fn allowed_values(mut self, values: Vec<Value>) -> Self {
        self.allowed_values = Some(values);
        self
    }

    /// Heat's schema document for this property.
    pub fn to_heat_json(&self) -> Value {
        let mut constraints = Vec::new();
        if let Some((minimum, maximum)) = self.range {
            let key = if matches!(self.kind, PropertyType::Integer | PropertyType::Number) {
                "range"
            } else {
                "length"
            };
            constraints.push(json!({ key: { "min": minimum, "max": maximum } }));
        }
        if let Some(values) = &self.allowed_values {
            constraints.push(json!({ "allowed_values": values }));
        }
        let mut document = json!({
            "type": self.kind.as_str(),
            "description": self.description,
            "required": self.required,
            "update_allowed": self.update_allowed,
            "immutable": false,
            "constraints": constraints,
        });
        if let (Some(default), Value::Object(map)) = (&self.default, &mut document) {
            map.insert("default".to_owned(), default.clone());
        }
        document
    }
}

#[derive(Debug, Clone)]
pub struct AttributeSchema {
    pub name: &'static str,
    pub description: &'static str,
}

#[derive(Debug, Clone)]
pub struct ResourceTypeSchema {
    pub type_name: &'static str,
    pub description: &'static str,
    pub properties: Vec<PropertySchema>,
    pub attributes: Vec<AttributeSchema>,
    /// Accept any properties without checking them (OS::Heat::None,
    /// template resources).
    pub accepts_any_properties: bool,
    /// Any attribute name is valid (template resources: the nested outputs).
    pub accepts_any_attributes: bool,
}

impl ResourceTypeSchema {
    pub fn property(&self, name: &str) -> Option<&PropertySchema> {
        self.properties
            .iter()
            .find(|property| property.name == name || property.aliases.contains(&name))
    }

    pub fn has_attribute(&self, name: &str) -> bool {
        // `show` is every resource's full-state attribute in Heat.
        self.accepts_any_attributes
            || name == "show"
            || self
                .attributes
                .iter()
                .any(|attribute| attribute.name == name)
    }
}

/// Checks resolved `properties` against `schema`: an object, no unknown
/// keys, required ones present, each of the right type and within its
/// constraints. Applies defaults. `path` prefixes errors
/// (`resources.server.properties`).
pub fn validate_properties(
    schema: &ResourceTypeSchema,
    properties: &Value,
    path: &str,
) -> Result<Map<String, Value>, String> {
    let given = match properties {
        Value::Object(map) => map.clone(),
        Value::Null => Map::new(),
        other => return Err(format!("{path}: must be a map, got {}", type_name(other))),
    };
    if schema.accepts_any_properties {
        return Ok(given);
    }
    let given = translate_aliases(schema, given).map_err(|message| format!("{path}: {message}"))?;
    if let Some(unknown) = given.keys().find(|key| schema.property(key).is_none()) {
        let known: Vec<&str> = schema
            .properties
            .iter()
            .map(|property| property.name)
            .collect();
        return Err(format!(
            "{path}: unknown property {unknown:?} for {} (known: {})",
            schema.type_name,
            known.join(", ")
        ));
    }
    let mut validated = Map::new();
    for property in &schema.properties {
        let property_path = format!("{path}.{}", property.name);
        let value = match given.get(property.name) {
            Some(Value::Null) | None => match &property.default {
                Some(default) => default.clone(),
                None if property.required => {
                    return Err(format!("{property_path}: property is required"));
                }
                None => continue,
            },
            Some(value) => {
                coerce(property, value).map_err(|message| format!("{property_path}: {message}"))?
            }
        };
        check_constraints(property, &value)
            .map_err(|message| format!("{property_path}: {message}"))?;
        validated.insert(property.name.to_owned(), value);
    }
    Ok(validated)
}

/// `given` with each property given by an older name (an alias) under its
/// name; both given is an error, in Heat's words.
pub fn translate_aliases(
    schema: &ResourceTypeSchema,
    mut given: Map<String, Value>,
) -> Result<Map<String, Value>, String> {
    for property in &schema.properties {
        for alias in property.aliases {
            let Some(value) = given.remove(*alias) else {
                continue;
            };
            if given.contains_key(property.name) {
                return Err(format!(
                    "Cannot define the following properties at the same time: {}, {alias}",
                    property.name
                ));
            }
            given.insert(property.name.to_owned(), value);
        }
    }
    Ok(given)
}

/// Checks one property's value as written in a template (no function in
/// it): its type and its constraints, as the run would.
pub fn check_literal_property(property: &PropertySchema, value: &Value) -> Result<(), String> {
    if value.is_null() {
        return Ok(());
    }
    let value = coerce(property, value)?;
    check_constraints(property, &value)
}

fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "a map",
    }
}

fn coerce(property: &PropertySchema, value: &Value) -> Result<Value, String> {
    let wrong = || {
        format!(
            "expected {}, got {}",
            property.kind.as_str(),
            type_name(value)
        )
    };
    match property.kind {
        PropertyType::Any => Ok(value.clone()),
        PropertyType::String => match value {
            Value::String(_) => Ok(value.clone()),
            Value::Number(number) => Ok(Value::String(number.to_string())),
            Value::Bool(flag) => Ok(Value::String(flag.to_string())),
            _ => Err(wrong()),
        },
        PropertyType::Integer => match value {
            Value::Number(number) if number.is_i64() || number.is_u64() => Ok(value.clone()),
            Value::Number(number) => match number.as_f64() {
                Some(float) if float.fract() == 0.0 && float.abs() < 9.0e15 => {
                    Ok(json!(float as i64))
                }
                _ => Err(format!("{number} is not an integer")),
            },
            Value::String(text) => text
                .trim()
                .parse::<i64>()
                .map(|integer| json!(integer))
                .map_err(|_| format!("{text:?} is not an integer")),
            _ => Err(wrong()),
        },
        PropertyType::Number => match value {
            Value::Number(_) => Ok(value.clone()),
            Value::String(text) => text
                .trim()
                .parse::<f64>()
                .ok()
                .and_then(Number::from_f64)
                .map(Value::Number)
                .ok_or_else(|| format!("{text:?} is not a number")),
            _ => Err(wrong()),
        },
        PropertyType::Boolean => match value {
            Value::Bool(_) => Ok(value.clone()),
            Value::String(text) => match text.to_ascii_lowercase().as_str() {
                "true" | "yes" | "on" | "1" | "t" | "y" => Ok(Value::Bool(true)),
                "false" | "no" | "off" | "0" | "f" | "n" => Ok(Value::Bool(false)),
                _ => Err(format!("{text:?} is not a boolean")),
            },
            Value::Number(number) if number.as_i64() == Some(0) || number.as_i64() == Some(1) => {
                Ok(Value::Bool(number.as_i64() == Some(1)))
            }
            _ => Err(wrong()),
        },
        PropertyType::Map => match value {
            Value::Object(_) => Ok(value.clone()),
            Value::String(text) => match serde_json::from_str::<Value>(text) {
                Ok(parsed @ Value::Object(_)) => Ok(parsed),
                _ => Err(wrong()),
            },
            _ => Err(wrong()),
        },
        PropertyType::List => match value {
            Value::Array(_) => Ok(value.clone()),
            // Heat accepts a comma-delimited string for a list property.
            Value::String(text) => Ok(Value::Array(
                text.split(',')
                    .filter(|item| !item.is_empty())
                    .map(|item| Value::String(item.to_owned()))
                    .collect(),
            )),
            _ => Err(wrong()),
        },
    }
}

fn check_constraints(property: &PropertySchema, value: &Value) -> Result<(), String> {
    if let Some((minimum, maximum)) = property.range {
        let (measured, what) = match value {
            Value::Number(number) => (number.as_f64().unwrap_or(f64::NAN), "value"),
            Value::String(text) => (text.chars().count() as f64, "length"),
            Value::Array(items) => (items.len() as f64, "length"),
            _ => (f64::NAN, "value"),
        };
        if !(minimum..=maximum).contains(&measured) {
            return Err(format!(
                "{what} {measured} is outside the range {minimum}-{maximum}"
            ));
        }
    }
    if let Some(allowed) = &property.allowed_values {
        // As Heat: a list's allowed values constrain each of its items.
        let items = match (property.kind, value) {
            (PropertyType::List, Value::Array(items)) => items.iter().collect(),
            _ => vec![value],
        };
        if let Some(refused) = items.into_iter().find(|item| !allowed.contains(item)) {
            let listed: Vec<String> = allowed.iter().map(Value::to_string).collect();
            return Err(format!("{refused} is not one of {}", listed.join(", ")));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn schema() -> ResourceTypeSchema {
        ResourceTypeSchema {
            type_name: "Test::Thing",
            description: "",
            properties: vec![
                PropertySchema::new("name", PropertyType::String, "").required(),
                PropertySchema::new("count", PropertyType::Integer, "")
                    .default(json!(1))
                    .range(1.0, 5.0),
                PropertySchema::new("enabled", PropertyType::Boolean, "").default(json!(false)),
                PropertySchema::new("tags", PropertyType::List, ""),
                PropertySchema::new("size", PropertyType::String, "")
                    .allowed_values(vec![json!("small"), json!("large")]),
            ],
            attributes: vec![],
            accepts_any_properties: false,
            accepts_any_attributes: false,
        }
    }

    #[test]
    fn an_older_name_is_taken_for_its_property_but_not_both() {
        let mut with_alias = schema();
        with_alias.properties[0] = PropertySchema::new("name", PropertyType::String, "")
            .required()
            .aliases(&["name_id"]);
        let validated = validate_properties(&with_alias, &json!({"name_id": "a"}), "p")
            .expect("the alias is the property");
        assert_eq!(validated["name"], json!("a"));
        assert!(!validated.contains_key("name_id"));
        let both = validate_properties(&with_alias, &json!({"name": "a", "name_id": "b"}), "p")
            .expect_err("both");
        assert_eq!(
            both,
            "p: Cannot define the following properties at the same time: name, name_id"
        );
    }

    #[test]
    fn defaults_apply_and_values_are_coerced() {
        let properties = json!({"name": 7, "enabled": "yes", "tags": "a,b"});
        let validated =
            validate_properties(&schema(), &properties, "resources.x.properties").expect("valid");
        assert_eq!(validated["name"], json!("7"));
        assert_eq!(validated["count"], json!(1));
        assert_eq!(validated["enabled"], json!(true));
        assert_eq!(validated["tags"], json!(["a", "b"]));
        assert!(!validated.contains_key("size"));
    }

    #[test]
    fn errors_name_the_property_path() {
        let cases = [
            (
                json!({}),
                "resources.x.properties.name: property is required",
            ),
            (
                json!({"name": "a", "colour": 1}),
                "unknown property \"colour\"",
            ),
            (
                json!({"name": "a", "count": "many"}),
                "properties.count: \"many\" is not an integer",
            ),
            (
                json!({"name": "a", "count": 9}),
                "properties.count: value 9 is outside the range 1-5",
            ),
            (
                json!({"name": "a", "size": "huge"}),
                "properties.size: \"huge\" is not one of",
            ),
            (
                json!({"name": "a", "enabled": "perhaps"}),
                "\"perhaps\" is not a boolean",
            ),
            (
                json!(["not", "a", "map"]),
                "resources.x.properties: must be a map",
            ),
        ];
        for (properties, expected) in cases {
            let error = validate_properties(&schema(), &properties, "resources.x.properties")
                .expect_err("invalid");
            assert!(
                error.contains(expected),
                "{error} should contain {expected}"
            );
        }
    }
}
