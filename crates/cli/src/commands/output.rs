//! How client commands print what they read, as the `openstack` CLI does:
//! one record (`show`) or rows (`list`), as an aligned table (the default),
//! JSON, YAML, or bare values (`-f value`, for shell variables), with `-c
//! COLUMN` to keep only some fields. A command only describes its fields —
//! a [`Record`] of named [`Cell`]s — and this module does the rest, so every
//! command's `-f json` has the same shape and a script never scrapes a table.
//!
//! Field names are what JSON and YAML use (`desired_capacity`); tables show
//! them with spaces (`desired capacity`, and `DESIRED CAPACITY` as a list
//! header). `-c` takes either spelling, in any case.

use ember_api_gateway::rest::orchestration::protobuf_json::struct_to_json;
use serde::ser::{Serialize, SerializeMap, Serializer};
use serde_json::Value;

use crate::error::CliError;

/// `-f` and `-c`, on every command that shows or lists.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct OutputArgs {
    /// Output format: an aligned table, JSON, YAML, or bare values (one
    /// field per line for show, one row per line for list)
    #[arg(
        short = 'f',
        long = "format",
        value_enum,
        default_value_t = Format::Table,
        help_heading = "Output"
    )]
    pub format: Format,
    /// Print only this field (column); repeat for several, in the order
    /// wanted. Names as in `-f json`
    #[arg(
        short = 'c',
        long = "column",
        value_name = "COLUMN",
        help_heading = "Output"
    )]
    pub columns: Vec<String>,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    #[default]
    Table,
    Json,
    Yaml,
    Value,
}

/// One field: the value JSON and YAML carry, and, when a person reads it
/// better otherwise (`unlimited` for a max size of -1), what a table shows.
#[derive(Debug, Clone, PartialEq)]
pub struct Cell {
    value: Value,
    text: Option<String>,
}

impl Cell {
    /// A field shown in a table as `text`, and as `value` in JSON and YAML.
    pub fn shown_as(value: impl Into<Value>, text: impl Into<String>) -> Cell {
        Cell {
            value: value.into(),
            text: Some(text.into()),
        }
    }

    /// A point in time: RFC 3339 in UTC, or null when there is none.
    pub fn time(timestamp: Option<&prost_types::Timestamp>) -> Cell {
        let text = super::stack::format_time(timestamp);
        if text.is_empty() {
            Cell::from(Value::Null)
        } else {
            Cell::from(text)
        }
    }

    /// A protobuf `Struct` (parameters, metadata) as a JSON object.
    pub fn object(fields: Option<&prost_types::Struct>) -> Cell {
        Cell::from(struct_to_json(fields))
    }

    /// JSON text (a spec, metadata) as the JSON value it holds; text that
    /// is not JSON stays text.
    pub fn json_text(text: &str) -> Cell {
        match serde_json::from_str::<Value>(text) {
            Ok(value) => Cell::from(value),
            Err(_) => Cell::from(text),
        }
    }

    /// What a table or `-f value` prints.
    pub fn text(&self) -> String {
        self.text.clone().unwrap_or_else(|| text_of(&self.value))
    }
}

/// A JSON value as a table cell: strings bare, lists one item per line,
/// objects `key=value` per line.
fn text_of(value: &Value) -> String {
    match value {
        Value::Null => String::new(),
        Value::String(text) => text.clone(),
        Value::Bool(_) | Value::Number(_) => value.to_string(),
        Value::Array(items) => items.iter().map(text_of).collect::<Vec<_>>().join("\n"),
        Value::Object(fields) => fields
            .iter()
            .map(|(key, value)| match value {
                Value::Array(_) | Value::Object(_) => format!("{key}={value}"),
                other => format!("{key}={}", text_of(other)),
            })
            .collect::<Vec<_>>()
            .join("\n"),
    }
}

impl<T: Into<Value>> From<T> for Cell {
    fn from(value: T) -> Cell {
        Cell {
            value: value.into(),
            text: None,
        }
    }
}

/// Named fields in the order they print.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Record {
    fields: Vec<(&'static str, Cell)>,
}

impl Record {
    pub fn new() -> Record {
        Record::default()
    }

    /// Adds a field (builder style).
    pub fn field(mut self, name: &'static str, cell: impl Into<Cell>) -> Record {
        self.fields.push((name, cell.into()));
        self
    }

    /// The record as a JSON object (to nest it in another record).
    pub fn to_json(&self) -> Value {
        Value::Object(
            self.fields
                .iter()
                .map(|(name, cell)| ((*name).to_owned(), cell.value.clone()))
                .collect(),
        )
    }

    fn names(&self) -> Vec<&'static str> {
        self.fields.iter().map(|(name, _)| *name).collect()
    }

    /// The fields `-c` asked for, in its order; all of them without `-c`.
    fn select(&self, positions: &[usize]) -> Record {
        Record {
            fields: positions
                .iter()
                .map(|&position| self.fields[position].clone())
                .collect(),
        }
    }
}

impl Serialize for Record {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(self.fields.len()))?;
        for (name, cell) in &self.fields {
            map.serialize_entry(name, &cell.value)?;
        }
        map.end()
    }
}

/// `desired capacity`, `Desired-Capacity` and `desired_capacity` name the
/// same field.
fn normalise(name: &str) -> String {
    name.trim().to_ascii_lowercase().replace([' ', '-'], "_")
}

/// The header text of a field: `desired capacity`.
fn spaced(name: &str) -> String {
    name.replace('_', " ")
}

impl OutputArgs {
    /// Where the fields `-c` names are, or an error naming the ones there
    /// are.
    fn positions(&self, names: &[&'static str]) -> Result<Vec<usize>, CliError> {
        if self.columns.is_empty() {
            return Ok((0..names.len()).collect());
        }
        self.columns
            .iter()
            .map(|wanted| {
                names
                    .iter()
                    .position(|name| normalise(name) == normalise(wanted))
                    .ok_or_else(|| {
                        CliError::Usage(format!(
                            "-c {wanted:?}: no such column; the columns are {}",
                            names.join(", ")
                        ))
                    })
            })
            .collect()
    }

    /// A table of every field: where a command may add the tables of what
    /// the object holds (a cluster's nodes).
    pub fn is_whole_table(&self) -> bool {
        self.format == Format::Table && self.columns.is_empty()
    }

    /// Prints one object: a FIELD/VALUE table, a JSON or YAML mapping, or
    /// each value on its own line.
    pub fn print_record(&self, record: &Record) -> Result<(), CliError> {
        print!("{}", self.render_record(record)?);
        Ok(())
    }

    /// Prints rows: a table under a header, a JSON or YAML list of
    /// mappings, or each row's values on one line. `row` describes one
    /// item; the header comes from describing an empty one, so an empty
    /// list still says what its columns are.
    pub fn print_list<T: Default>(
        &self,
        items: &[T],
        row: impl Fn(&T) -> Record,
    ) -> Result<(), CliError> {
        let rows: Vec<Record> = items.iter().map(&row).collect();
        print!("{}", self.render_list(&row(&T::default()).names(), &rows)?);
        Ok(())
    }

    fn render_record(&self, record: &Record) -> Result<String, CliError> {
        let record = record.select(&self.positions(&record.names())?);
        match self.format {
            Format::Table => {
                let rows: Vec<Vec<String>> = record
                    .fields
                    .iter()
                    .map(|(name, cell)| vec![spaced(name), cell.text()])
                    .collect();
                Ok(table(&["FIELD".to_owned(), "VALUE".to_owned()], &rows))
            }
            Format::Json => json(&record),
            Format::Yaml => yaml(&record),
            Format::Value => Ok(record
                .fields
                .iter()
                .map(|(_, cell)| format!("{}\n", cell.text()))
                .collect()),
        }
    }

    fn render_list(&self, names: &[&'static str], rows: &[Record]) -> Result<String, CliError> {
        let positions = self.positions(names)?;
        let rows: Vec<Record> = rows.iter().map(|row| row.select(&positions)).collect();
        match self.format {
            Format::Table => {
                let header: Vec<String> = positions
                    .iter()
                    .map(|&position| spaced(names[position]).to_ascii_uppercase())
                    .collect();
                let cells: Vec<Vec<String>> = rows
                    .iter()
                    .map(|row| row.fields.iter().map(|(_, cell)| cell.text()).collect())
                    .collect();
                Ok(table(&header, &cells))
            }
            Format::Json => json(&rows),
            Format::Yaml => yaml(&rows),
            Format::Value => Ok(rows
                .iter()
                .map(|row| {
                    let values: Vec<String> = row
                        .fields
                        .iter()
                        .map(|(_, cell)| cell.text().replace('\n', ","))
                        .collect();
                    format!("{}\n", values.join(" "))
                })
                .collect()),
        }
    }
}

fn json(value: &impl Serialize) -> Result<String, CliError> {
    serde_json::to_string_pretty(value)
        .map(|text| format!("{text}\n"))
        .map_err(|error| CliError::Failed(format!("cannot print JSON: {error}")))
}

fn yaml(value: &impl Serialize) -> Result<String, CliError> {
    serde_yaml_ng::to_string(value)
        .map_err(|error| CliError::Failed(format!("cannot print YAML: {error}")))
}

/// Aligned columns under a header; a cell of several lines continues on
/// the following lines in its own column.
pub fn table(header: &[String], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = header.iter().map(|title| title.chars().count()).collect();
    for row in rows {
        for (width, cell) in widths.iter_mut().zip(row) {
            let widest = cell.lines().map(|line| line.chars().count()).max();
            *width = (*width).max(widest.unwrap_or(0));
        }
    }
    let mut printed = String::new();
    let mut line = |cells: &[&str]| {
        let padded: Vec<String> = cells
            .iter()
            .zip(&widths)
            .map(|(cell, width)| format!("{cell:<width$}"))
            .collect();
        printed.push_str(padded.join("  ").trim_end());
        printed.push('\n');
    };
    line(&header.iter().map(String::as_str).collect::<Vec<_>>());
    for row in rows {
        let cell_lines: Vec<Vec<&str>> = row.iter().map(|cell| cell.lines().collect()).collect();
        let height = cell_lines.iter().map(Vec::len).max().unwrap_or(0).max(1);
        for index in 0..height {
            let cells: Vec<&str> = cell_lines
                .iter()
                .map(|lines| lines.get(index).copied().unwrap_or(""))
                .collect();
            line(&cells);
        }
    }
    printed
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn cluster() -> Record {
        Record::new()
            .field("id", "c1")
            .field("name", "web")
            .field("max_size", Cell::shown_as(-1, "unlimited"))
            .field("desired_capacity", 2)
            .field("policies", json!(["drain", "scale"]))
            .field("created", Cell::time(None))
    }

    fn output(format: Format, columns: &[&str]) -> OutputArgs {
        OutputArgs {
            format,
            columns: columns.iter().map(|column| (*column).to_owned()).collect(),
        }
    }

    #[test]
    fn a_record_prints_as_a_field_table_json_yaml_and_values() {
        let table = output(Format::Table, &[])
            .render_record(&cluster())
            .unwrap();
        assert_eq!(
            table,
            "FIELD             VALUE\nid                c1\nname              web\nmax size          unlimited\ndesired capacity  2\npolicies          drain\n                  scale\ncreated\n"
        );
        let json_text = output(Format::Json, &[]).render_record(&cluster()).unwrap();
        let parsed: Value = serde_json::from_str(&json_text).unwrap();
        assert_eq!(
            parsed,
            json!({"id": "c1", "name": "web", "max_size": -1, "desired_capacity": 2,
                   "policies": ["drain", "scale"], "created": null})
        );
        assert!(
            json_text.find("\"id\"") < json_text.find("\"name\""),
            "fields keep their order: {json_text}"
        );
        let yaml_text = output(Format::Yaml, &["name", "max size"])
            .render_record(&cluster())
            .unwrap();
        assert_eq!(yaml_text, "name: web\nmax_size: -1\n");
        let values = output(Format::Value, &["Desired-Capacity", "id"])
            .render_record(&cluster())
            .unwrap();
        assert_eq!(values, "2\nc1\n");
    }

    #[test]
    fn a_list_prints_rows_and_keeps_its_header_when_empty() {
        let rows = vec![cluster(), cluster().field("extra", "ignored")];
        let names = cluster().names();
        let table = output(Format::Table, &["id", "max_size"])
            .render_list(&names, &rows)
            .unwrap();
        assert_eq!(table, "ID  MAX SIZE\nc1  unlimited\nc1  unlimited\n");
        let empty = output(Format::Table, &["id", "name"])
            .render_list(&names, &[])
            .unwrap();
        assert_eq!(empty, "ID  NAME\n");
        let json_text = output(Format::Json, &[]).render_list(&names, &[]).unwrap();
        assert_eq!(json_text, "[]\n");
        let values = output(Format::Value, &["name", "policies"])
            .render_list(&names, &rows[..1])
            .unwrap();
        assert_eq!(values, "web drain,scale\n");
    }

    #[test]
    fn an_unknown_column_is_an_error_naming_the_columns() {
        let error = output(Format::Json, &["nodes"])
            .render_record(&cluster())
            .unwrap_err();
        assert_eq!(
            error,
            CliError::Usage(
                "-c \"nodes\": no such column; the columns are id, name, max_size, desired_capacity, policies, created"
                    .to_owned()
            )
        );
    }
}
