//! Reading a template and its environments from disk the way
//! python-heatclient does: every `get_file` and every template-resource
//! `type: something.yaml` is read relative to the file that names it, stored
//! in the stack's `files` under its absolute `file://` URL, and the
//! reference is rewritten to that URL, so nested templates in other
//! directories cannot collide. Nested templates are processed the same way,
//! and sent (like the template itself) as JSON text.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

use crate::error::CliError;

/// What a template and its environments bring to a stack request.
#[derive(Debug, Default, PartialEq)]
pub struct TemplateBundle {
    /// The template as JSON text, references rewritten.
    pub template: String,
    /// file:// URL → content.
    pub files: HashMap<String, String>,
    /// URLs (keys of `files`) of the environments, in the order given.
    pub environment_files: Vec<String>,
}

/// Suffixes that make a resource `type` a template file, as in heatclient.
const TEMPLATE_SUFFIXES: &[&str] = &[".yaml", ".yml", ".template"];

/// Reads `template` (optional for a PATCH) and `environments`.
pub fn load(template: Option<&Path>, environments: &[PathBuf]) -> Result<TemplateBundle, CliError> {
    let mut files = HashMap::new();
    let template = match template {
        Some(path) => process_template(path, &mut files)?,
        None => String::new(),
    };
    let mut environment_files = Vec::new();
    for path in environments {
        let url = file_url(path)?;
        let text = process_environment(path, &mut files)?;
        files.insert(url.clone(), text);
        environment_files.push(url);
    }
    Ok(TemplateBundle {
        template,
        files,
        environment_files,
    })
}

fn read(path: &Path) -> Result<String, CliError> {
    std::fs::read_to_string(path)
        .map_err(|error| CliError::Usage(format!("cannot read {}: {error}", path.display())))
}

fn parse_document(path: &Path, text: &str) -> Result<Value, CliError> {
    serde_yaml_ng::from_str::<Value>(text).map_err(|error| {
        CliError::Usage(format!(
            "{} is not valid YAML or JSON: {error}",
            path.display()
        ))
    })
}

/// `file:///absolute/path` of a local file.
fn file_url(path: &Path) -> Result<String, CliError> {
    let absolute = std::fs::canonicalize(path)
        .map_err(|error| CliError::Usage(format!("cannot read {}: {error}", path.display())))?;
    Ok(format!("file://{}", absolute.display()))
}

/// The file a reference names, relative to the directory of the file that
/// names it; only local files can be read.
fn referenced_path(reference: &str, base_dir: &Path) -> Result<PathBuf, CliError> {
    if let Some(path) = reference.strip_prefix("file://") {
        return Ok(PathBuf::from(path));
    }
    if reference.contains("://") {
        return Err(CliError::Usage(format!(
            "{reference:?}: only local files can be sent with a stack; download it first"
        )));
    }
    Ok(base_dir.join(reference))
}

fn base_dir(path: &Path) -> Result<PathBuf, CliError> {
    let absolute = std::fs::canonicalize(path)
        .map_err(|error| CliError::Usage(format!("cannot read {}: {error}", path.display())))?;
    Ok(absolute
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("/")))
}

/// Reads a template, collects what it references, returns it as JSON text.
fn process_template(path: &Path, files: &mut HashMap<String, String>) -> Result<String, CliError> {
    let mut document = parse_document(path, &read(path)?)?;
    if !document.is_object() {
        return Err(CliError::Usage(format!(
            "{} is not a template: it is not a mapping",
            path.display()
        )));
    }
    let base = base_dir(path)?;
    collect_references(&mut document, &base, files)?;
    Ok(document.to_string())
}

fn looks_like_template(text: &str) -> bool {
    serde_yaml_ng::from_str::<Value>(text).is_ok_and(|document| {
        document.get("heat_template_version").is_some()
            || document.get("HeatTemplateFormatVersion").is_some()
    })
}

fn is_template_type(key: &str, value: &str) -> bool {
    key == "type"
        && TEMPLATE_SUFFIXES
            .iter()
            .any(|suffix| value.ends_with(suffix))
}

/// Walks a template: `get_file` and template-resource `type` values are
/// read, stored in `files`, and replaced by their URLs.
fn collect_references(
    node: &mut Value,
    base: &Path,
    files: &mut HashMap<String, String>,
) -> Result<(), CliError> {
    match node {
        Value::Array(items) => {
            for item in items {
                collect_references(item, base, files)?;
            }
        }
        Value::Object(map) => {
            for (key, value) in map.iter_mut() {
                match value {
                    Value::String(reference)
                        if key == "get_file" || is_template_type(key, reference) =>
                    {
                        let is_type = key == "type";
                        *reference = store_file(reference, base, is_type, files)?;
                    }
                    _ => collect_references(value, base, files)?,
                }
            }
        }
        _ => {}
    }
    Ok(())
}

/// Stores one referenced file (a template is processed first) and returns
/// the URL it is stored under.
fn store_file(
    reference: &str,
    base: &Path,
    is_template: bool,
    files: &mut HashMap<String, String>,
) -> Result<String, CliError> {
    let path = referenced_path(reference, base)?;
    let url = file_url(&path)?;
    if files.contains_key(&url) {
        return Ok(url);
    }
    let content = read(&path)?;
    let content = if is_template || looks_like_template(&content) {
        // Reserve the key first: a template that refers back to itself
        // must not send this walk round in circles.
        files.insert(url.clone(), String::new());
        process_template(&path, files)?
    } else {
        content
    };
    files.insert(url.clone(), content);
    Ok(url)
}

/// Reads an environment, collects the templates its `resource_registry`
/// maps types to, returns it as JSON text.
fn process_environment(
    path: &Path,
    files: &mut HashMap<String, String>,
) -> Result<String, CliError> {
    let mut document = parse_document(path, &read(path)?)?;
    let Value::Object(environment) = &mut document else {
        return Err(CliError::Usage(format!(
            "{} is not an environment: it is not a mapping",
            path.display()
        )));
    };
    let base = base_dir(path)?;
    if let Some(Value::Object(registry)) = environment.get_mut("resource_registry") {
        let registry_base = match registry.get("base_url").and_then(Value::as_str) {
            Some(url) => referenced_path(url, &base)?,
            None => base.clone(),
        };
        rewrite_registry(registry, &registry_base, files)?;
    }
    Ok(document.to_string())
}

fn rewrite_registry(
    registry: &mut Map<String, Value>,
    base: &Path,
    files: &mut HashMap<String, String>,
) -> Result<(), CliError> {
    for (key, value) in registry.iter_mut() {
        match value {
            Value::String(target)
                if key != "base_url"
                    && TEMPLATE_SUFFIXES
                        .iter()
                        .any(|suffix| target.ends_with(suffix)) =>
            {
                *target = store_file(target, base, true, files)?;
            }
            // `resources: {name: {type: template}}` entries nest one level.
            Value::Object(nested) => rewrite_registry(nested, base, files)?,
            _ => {}
        }
    }
    Ok(())
}

/// `-P key=value` parameters (`;` separates several in one, as in heat).
pub fn parse_parameters(pairs: &[String]) -> Result<Map<String, Value>, CliError> {
    let mut parameters = Map::new();
    for pair in pairs.iter().flat_map(|pair| pair.split(';')) {
        if pair.trim().is_empty() {
            continue;
        }
        let Some((key, value)) = pair.split_once('=') else {
            return Err(CliError::Usage(format!(
                "parameter {pair:?} must be KEY=VALUE"
            )));
        };
        parameters.insert(key.trim().to_owned(), Value::String(value.to_owned()));
    }
    Ok(parameters)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
        let path = dir.join(name);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).expect("dir");
        }
        std::fs::write(&path, text).expect("write");
        path
    }

    #[test]
    fn get_file_and_template_types_are_collected_relative_to_their_file() {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = std::fs::canonicalize(dir.path()).expect("absolute");
        write(&root, "script.sh", "echo top\n");
        write(&root, "sub/script.sh", "echo nested\n");
        write(
            &root,
            "sub/nested.yaml",
            "heat_template_version: 2018-08-31\nresources:\n  v:\n    type: OS::Heat::Value\n    properties:\n      value: {get_file: script.sh}\n",
        );
        let main = write(
            &root,
            "main.yaml",
            "heat_template_version: 2018-08-31\nresources:\n  a:\n    type: OS::Heat::Value\n    properties:\n      value: {get_file: script.sh}\n  b:\n    type: sub/nested.yaml\n  c:\n    type: OS::Heat::None\n",
        );
        let bundle = load(Some(&main), &[]).expect("loads");
        let top_url = format!("file://{}/script.sh", root.display());
        let nested_url = format!("file://{}/sub/nested.yaml", root.display());
        let nested_script_url = format!("file://{}/sub/script.sh", root.display());
        assert_eq!(bundle.files[&top_url], "echo top\n");
        assert_eq!(bundle.files[&nested_script_url], "echo nested\n");
        assert_eq!(bundle.files.len(), 3);

        let template: Value = serde_json::from_str(&bundle.template).expect("json");
        assert_eq!(template["heat_template_version"], "2018-08-31");
        assert_eq!(
            template["resources"]["a"]["properties"]["value"]["get_file"],
            top_url.as_str()
        );
        assert_eq!(template["resources"]["b"]["type"], nested_url.as_str());
        assert_eq!(template["resources"]["c"]["type"], "OS::Heat::None");
        let nested: Value = serde_json::from_str(&bundle.files[&nested_url]).expect("nested json");
        assert_eq!(
            nested["resources"]["v"]["properties"]["value"]["get_file"],
            nested_script_url.as_str()
        );
    }

    #[test]
    fn environments_are_sent_as_files_with_their_registry_templates() {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = std::fs::canonicalize(dir.path()).expect("absolute");
        write(
            &root,
            "server.yaml",
            "heat_template_version: 2018-08-31\nresources: {}\n",
        );
        let main = write(&root, "main.yaml", "heat_template_version: 2018-08-31\n");
        let environment = write(
            &root,
            "env.yaml",
            "parameters:\n  size: 3\nresource_registry:\n  My::Server: server.yaml\n  OS::Alias: OS::Heat::None\n",
        );
        let bundle = load(Some(&main), &[environment]).expect("loads");
        let environment_url = format!("file://{}/env.yaml", root.display());
        let server_url = format!("file://{}/server.yaml", root.display());
        assert_eq!(
            bundle.environment_files,
            std::slice::from_ref(&environment_url)
        );
        let sent: Value = serde_json::from_str(&bundle.files[&environment_url]).expect("json");
        assert_eq!(sent["parameters"]["size"], 3);
        assert_eq!(sent["resource_registry"]["My::Server"], server_url.as_str());
        assert_eq!(sent["resource_registry"]["OS::Alias"], "OS::Heat::None");
        assert!(bundle.files.contains_key(&server_url));
    }

    #[test]
    fn missing_and_remote_files_are_named() {
        let dir = tempfile::tempdir().expect("tempdir");
        let main = write(
            dir.path(),
            "main.yaml",
            "heat_template_version: 2018-08-31\noutputs:\n  o:\n    value: {get_file: missing.txt}\n",
        );
        let error = load(Some(&main), &[]).expect_err("missing");
        assert!(
            matches!(&error, CliError::Usage(message) if message.contains("missing.txt")),
            "{error:?}"
        );
        let remote = write(
            dir.path(),
            "remote.yaml",
            "heat_template_version: 2018-08-31\noutputs:\n  o:\n    value: {get_file: 'https://example.org/x'}\n",
        );
        let error = load(Some(&remote), &[]).expect_err("remote");
        assert!(
            matches!(&error, CliError::Usage(message) if message.contains("only local files")),
            "{error:?}"
        );
        let error = load(Some(&dir.path().join("absent.yaml")), &[]).expect_err("absent");
        assert!(
            matches!(&error, CliError::Usage(message) if message.contains("absent.yaml")),
            "{error:?}"
        );
    }

    #[test]
    fn parameters_are_key_value_pairs() {
        let parsed = parse_parameters(&["a=1".into(), "b=x=y;c=".into()]).expect("parsed");
        assert_eq!(parsed["a"], "1");
        assert_eq!(parsed["b"], "x=y");
        assert_eq!(parsed["c"], "");
        assert!(parse_parameters(&["novalue".into()]).is_err());
    }
}
