//! A cluster's `config` (Senlin's, from API 1.7): a JSON object whose keys
//! change how the cluster treats its members.
//!
//! - `node.name.format` names each new member (create, scale-out, resize
//!   up, a node created into the cluster) with Senlin's directives: `$nI`
//!   the member's index zero-padded to `n` digits, `$nR` / `$nr` `n`
//!   random letters and digits (upper and lower case / lower case only;
//!   `n` defaults to 8). Without it members keep Ember's
//!   `node-<cluster>-<index>` names.
//! - `cluster.stop_node_before_delete` stops a member's instance (its
//!   profile's `stop` operation) before the member is deleted; a failed
//!   stop is recorded and the delete goes on, as in Senlin.
//! - `cluster.stop_timeout_before_update`: seconds a profile update may
//!   wait for an instance to stop; kept as an integer, as Senlin keeps it.
//!
//! Other keys are kept as given and shown. Senlin checks the values only
//! when an action uses them (a bad one fails that action later); Ember
//! checks them when the config is given, so a bad value is a 400 and
//! nothing is created or changed.

use rand::Rng;
use serde_json::{Map, Value};
use uuid::Uuid;

use super::{member_node_name, validate_name};
use crate::error::{Error, Result};

pub const NODE_NAME_FORMAT: &str = "node.name.format";
pub const STOP_NODE_BEFORE_DELETE: &str = "cluster.stop_node_before_delete";
pub const STOP_TIMEOUT_BEFORE_UPDATE: &str = "cluster.stop_timeout_before_update";

/// The longest name a format may produce (node names are 1-255 chars).
const MAX_NAME_LENGTH: usize = 255;

/// The random width of `$R` without a number (Senlin's default).
const DEFAULT_RANDOM_WIDTH: usize = 8;

/// Checked cluster config: the caller's object, with
/// `cluster.stop_timeout_before_update` made an integer.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ClusterConfig {
    values: Map<String, Value>,
}

impl ClusterConfig {
    /// Checks a config a caller gives; each error names the key and why.
    pub fn parse(mut values: Map<String, Value>) -> Result<ClusterConfig> {
        match values.get(NODE_NAME_FORMAT) {
            // Empty: the default names, as in Senlin.
            None | Some(Value::Null) => {}
            Some(Value::String(format)) if format.is_empty() => {}
            Some(Value::String(format)) => check_name_format(format)?,
            Some(other) => {
                return Err(Error::InvalidInput(format!(
                    "The value for '{NODE_NAME_FORMAT}' must be a string, not {other}"
                )));
            }
        }
        if let Some(value) = values.get(STOP_NODE_BEFORE_DELETE) {
            flag(value).ok_or_else(|| {
                Error::InvalidInput(format!(
                    "The value for '{STOP_NODE_BEFORE_DELETE}' must be a boolean, not {value}"
                ))
            })?;
        }
        if let Some(value) = values.get_mut(STOP_TIMEOUT_BEFORE_UPDATE)
            && let Some(seconds) = stop_timeout(value)?
        {
            *value = Value::from(seconds);
        }
        Ok(ClusterConfig { values })
    }

    /// A config as stored (it was checked when it was given).
    pub fn stored(values: Map<String, Value>) -> ClusterConfig {
        ClusterConfig { values }
    }

    pub fn values(&self) -> &Map<String, Value> {
        &self.values
    }

    /// The name of the member of `cluster_id` with `index`.
    pub fn node_name(&self, cluster_id: Uuid, index: i32) -> String {
        match self.values.get(NODE_NAME_FORMAT).and_then(Value::as_str) {
            Some(format) if !format.is_empty() => format_node_name(format, index, &mut rand::rng()),
            _ => member_node_name(cluster_id, index),
        }
    }

    /// Whether members are stopped before they are deleted.
    pub fn stop_node_before_delete(&self) -> bool {
        self.values
            .get(STOP_NODE_BEFORE_DELETE)
            .and_then(flag)
            .unwrap_or(false)
    }

    /// Seconds to wait for an instance to stop before an update, if set.
    pub fn stop_timeout_before_update(&self) -> Option<u64> {
        self.values
            .get(STOP_TIMEOUT_BEFORE_UPDATE)
            .and_then(Value::as_u64)
    }
}

/// A boolean as Senlin's clients send it: JSON `true`/`false`, or text
/// (`openstack cluster create --config key=value` sends text) such as
/// `true`, `false`, `yes`, `no`, `on`, `off`, `1`, `0`; null is false.
fn flag(value: &Value) -> Option<bool> {
    match value {
        Value::Null => Some(false),
        Value::Bool(flag) => Some(*flag),
        Value::Number(number) => match number.as_i64() {
            Some(0) => Some(false),
            Some(1) => Some(true),
            _ => None,
        },
        Value::String(text) => match text.trim().to_ascii_lowercase().as_str() {
            "true" | "t" | "yes" | "y" | "on" | "1" => Some(true),
            "false" | "f" | "no" | "n" | "off" | "0" | "" => Some(false),
            _ => None,
        },
        Value::Array(_) | Value::Object(_) => None,
    }
}

/// `cluster.stop_timeout_before_update` as Senlin's `int()` reads it
/// (a number, or text holding one); a value Senlin skips (null, 0, empty
/// text) stays as given (`None`). The messages are Python's and Senlin's.
fn stop_timeout(value: &Value) -> Result<Option<i64>> {
    let seconds = match value {
        Value::Null => return Ok(None),
        Value::Number(number) => match (number.as_i64(), number.as_f64()) {
            (Some(seconds), _) => seconds,
            // Python's int() truncates a float (finite and in range here).
            (None, Some(float)) if float.is_finite() && float.abs() < 9.0e15 => {
                float.trunc() as i64
            }
            _ => {
                return Err(Error::InvalidInput(format!(
                    "{STOP_TIMEOUT_BEFORE_UPDATE} value must be of type int."
                )));
            }
        },
        Value::String(text) if text.is_empty() => return Ok(None),
        Value::String(text) => text.trim().parse::<i64>().map_err(|_| {
            Error::InvalidInput(format!("invalid literal for int() with base 10: '{text}'"))
        })?,
        Value::Bool(_) | Value::Array(_) | Value::Object(_) => {
            return Err(Error::InvalidInput(format!(
                "{STOP_TIMEOUT_BEFORE_UPDATE} value must be of type int."
            )));
        }
    };
    if seconds < 0 {
        return Err(Error::InvalidInput(format!(
            "Value must be >= 0 for field '{STOP_TIMEOUT_BEFORE_UPDATE}'. (got {seconds})"
        )));
    }
    Ok(Some(seconds))
}

/// One piece of a name format.
#[derive(Debug, Clone, PartialEq)]
enum Piece<'a> {
    Literal(&'a str),
    /// `$nR` (`lower`: `$nr`).
    Random {
        width: usize,
        lower: bool,
    },
    /// `$nI`: the index, zero-padded to `width` digits.
    Index {
        width: usize,
    },
}

/// Splits a format as Senlin's `\$\d{0,8}[rRI]` does: a `$`, at most 8
/// digits, then `r`, `R` or `I`; any other `$` is kept as it is.
fn pieces(format: &str) -> Vec<Piece<'_>> {
    let bytes = format.as_bytes();
    let mut pieces = Vec::new();
    let (mut literal_from, mut at) = (0, 0);
    while at < bytes.len() {
        if bytes[at] != b'$' {
            at += 1;
            continue;
        }
        let digits = bytes[at + 1..]
            .iter()
            .take_while(|byte| byte.is_ascii_digit())
            .count();
        let kind = bytes.get(at + 1 + digits).copied();
        if digits > 8 || !matches!(kind, Some(b'r' | b'R' | b'I')) {
            at += 1;
            continue;
        }
        let width_text = &format[at + 1..at + 1 + digits];
        let width = width_text.parse::<usize>().ok();
        if literal_from < at {
            pieces.push(Piece::Literal(&format[literal_from..at]));
        }
        pieces.push(match kind {
            Some(b'I') => Piece::Index {
                width: width.unwrap_or(0),
            },
            _ => Piece::Random {
                width: width.unwrap_or(DEFAULT_RANDOM_WIDTH),
                lower: kind == Some(b'r'),
            },
        });
        at += 2 + digits;
        literal_from = at;
    }
    if literal_from < bytes.len() {
        pieces.push(Piece::Literal(&format[literal_from..]));
    }
    pieces
}

/// Senlin's `format_node_name`: the name of the member with `index`.
pub fn format_node_name(format: &str, index: i32, random: &mut impl Rng) -> String {
    let mut name = String::new();
    for piece in pieces(format) {
        match piece {
            Piece::Literal(text) => name.push_str(text),
            Piece::Index { width } => name.push_str(&format!("{index:0width$}")),
            Piece::Random { width, lower } => {
                let text = random_name(width, random);
                name.push_str(&if lower { text.to_lowercase() } else { text });
            }
        }
    }
    name
}

/// Senlin's `random_name`: a letter, then letters and digits.
fn random_name(width: usize, random: &mut impl Rng) -> String {
    const LETTERS: &[u8] = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ";
    const ALPHANUMERIC: &[u8] = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    (0..width)
        .map(|position| {
            let alphabet = if position == 0 { LETTERS } else { ALPHANUMERIC };
            char::from(alphabet[random.random_range(0..alphabet.len())])
        })
        .collect()
}

/// A format must give valid node names: short enough, and made of the
/// characters a node name may have.
fn check_name_format(format: &str) -> Result<()> {
    let longest: usize = pieces(format)
        .iter()
        .map(|piece| match piece {
            Piece::Literal(text) => text.len(),
            Piece::Random { width, .. } => *width,
            // An index has at most 10 digits.
            Piece::Index { width } => (*width).max(10),
        })
        .sum();
    if longest > MAX_NAME_LENGTH {
        return Err(Error::InvalidInput(format!(
            "The value for '{NODE_NAME_FORMAT}' gives names longer than {MAX_NAME_LENGTH} characters: {format:?}"
        )));
    }
    let sample = format_node_name(format, 1, &mut rand::rng());
    validate_name("node", &sample).map_err(|_| {
        Error::InvalidInput(format!(
            "The value for '{NODE_NAME_FORMAT}' gives invalid node names such as {sample:?}: \
             a name is 1-255 letters, digits and _-.~, starting with a letter or digit"
        ))
    })
}

#[cfg(test)]
mod tests {
    use rand::SeedableRng;
    use rand::rngs::StdRng;
    use serde_json::json;

    use super::*;

    fn config(value: Value) -> Result<ClusterConfig> {
        match value {
            Value::Object(values) => ClusterConfig::parse(values),
            other => panic!("not an object: {other}"),
        }
    }

    fn message(result: Result<ClusterConfig>) -> String {
        match result {
            Err(Error::InvalidInput(message)) => message,
            other => panic!("expected InvalidInput, got {other:?}"),
        }
    }

    #[test]
    fn an_index_is_padded_and_random_text_has_its_width() {
        let mut random = StdRng::seed_from_u64(7);
        assert_eq!(format_node_name("web-$3I", 7, &mut random), "web-007");
        assert_eq!(format_node_name("web-$I", 12, &mut random), "web-12");
        assert_eq!(format_node_name("$2I-x", 123, &mut random), "123-x");
        let name = format_node_name("n-$5R-$I", 4, &mut random);
        assert_eq!(name.len(), "n-".len() + 5 + "-4".len(), "{name}");
        assert!(
            name[2..3].chars().all(|c| c.is_ascii_alphabetic()),
            "{name}"
        );
        let name = format_node_name("$R", 1, &mut random);
        assert_eq!(name.len(), 8, "{name}");
        let name = format_node_name("$6r", 1, &mut random);
        assert_eq!(name, name.to_lowercase());
        assert_eq!(name.len(), 6);
    }

    #[test]
    fn a_dollar_that_is_no_directive_stays() {
        let mut random = StdRng::seed_from_u64(1);
        assert_eq!(format_node_name("a$b", 1, &mut random), "a$b");
        assert_eq!(format_node_name("a$", 1, &mut random), "a$");
        // More than 8 digits is no directive (Senlin's \d{0,8}).
        assert_eq!(
            format_node_name("a$123456789I", 1, &mut random),
            "a$123456789I"
        );
        assert_eq!(format_node_name("$$I", 3, &mut random), "$3");
    }

    #[test]
    fn members_are_named_by_the_format_or_as_before() {
        let cluster = Uuid::now_v7();
        assert_eq!(
            ClusterConfig::default().node_name(cluster, 3),
            member_node_name(cluster, 3)
        );
        let named = config(json!({"node.name.format": "db-$2I"})).expect("valid");
        assert_eq!(named.node_name(cluster, 3), "db-03");
        let empty = config(json!({"node.name.format": ""})).expect("valid");
        assert_eq!(empty.node_name(cluster, 3), member_node_name(cluster, 3));
    }

    #[test]
    fn the_flags_and_the_timeout_read_as_senlin_clients_send_them() {
        let given = config(json!({
            "cluster.stop_node_before_delete": "True",
            "cluster.stop_timeout_before_update": " 30 ",
            "other": {"kept": 1},
        }))
        .expect("valid");
        assert!(given.stop_node_before_delete());
        assert_eq!(given.stop_timeout_before_update(), Some(30));
        assert_eq!(given.values()["cluster.stop_timeout_before_update"], 30);
        assert_eq!(given.values()["other"], json!({"kept": 1}));
        let off = config(json!({"cluster.stop_node_before_delete": false})).expect("valid");
        assert!(!off.stop_node_before_delete());
        assert!(!ClusterConfig::default().stop_node_before_delete());
        let float = config(json!({"cluster.stop_timeout_before_update": 12.9})).expect("valid");
        assert_eq!(float.stop_timeout_before_update(), Some(12));
    }

    #[test]
    fn bad_values_are_refused_naming_the_key() {
        assert_eq!(
            message(config(
                json!({"cluster.stop_timeout_before_update": "soon"})
            )),
            "invalid literal for int() with base 10: 'soon'"
        );
        assert_eq!(
            message(config(json!({"cluster.stop_timeout_before_update": [1]}))),
            "cluster.stop_timeout_before_update value must be of type int."
        );
        assert_eq!(
            message(config(json!({"cluster.stop_timeout_before_update": -1}))),
            "Value must be >= 0 for field 'cluster.stop_timeout_before_update'. (got -1)"
        );
        assert!(
            message(config(json!({"cluster.stop_node_before_delete": "maybe"})))
                .contains("'cluster.stop_node_before_delete' must be a boolean")
        );
        assert!(
            message(config(json!({"node.name.format": 5})))
                .contains("'node.name.format' must be a string")
        );
        assert!(
            message(config(json!({"node.name.format": "web server-$I"})))
                .contains("gives invalid node names")
        );
        assert!(
            message(config(json!({"node.name.format": "n-$99999999I"})))
                .contains("longer than 255 characters")
        );
    }
}
