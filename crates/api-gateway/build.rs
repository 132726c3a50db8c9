//! Embeds the web console (`console/`, served at `/console/`) in the
//! gateway: writes `$OUT_DIR/console_assets.rs`, one `(path, bytes)` entry
//! per file, sorted by path, for `src/console.rs` to include.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

fn main() {
    let root = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("set by cargo"))
        .join("console");
    println!("cargo:rerun-if-changed={}", root.display());
    let mut files = Vec::new();
    collect(&root, &mut files);
    files.sort();
    let mut table = String::from("&[\n");
    for file in &files {
        let relative = file
            .strip_prefix(&root)
            .expect("walked from the root")
            .components()
            .map(|part| {
                part.as_os_str()
                    .to_str()
                    .expect("console file names are UTF-8")
            })
            .collect::<Vec<_>>()
            .join("/");
        writeln!(
            table,
            "    ({relative:?}, include_bytes!({:?})),",
            file.display().to_string()
        )
        .expect("writing to a String");
    }
    table.push(']');
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("set by cargo"));
    std::fs::write(out.join("console_assets.rs"), table).expect("OUT_DIR is writable");
}

/// Every file under `dir`, depth first; dot files and the notes for
/// people working on the console (`*.md`) are left out.
fn collect(dir: &Path, files: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries {
        let path = entry.expect("a readable console directory").path();
        let name = path
            .file_name()
            .map(|name| name.to_string_lossy().into_owned());
        if name.is_some_and(|name| name.starts_with('.') || name.ends_with(".md")) {
            continue;
        }
        if path.is_dir() {
            collect(&path, files);
        } else {
            files.push(path);
        }
    }
}
