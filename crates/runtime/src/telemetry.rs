//! Tracing set-up: human-readable text by default, JSON lines for log
//! pipelines. `RUST_LOG` overrides the configured filter.

use tracing_subscriber::EnvFilter;

use crate::config::{LogConfig, LogFormat};

/// The format [`init`] chose, once it ran.
static FORMAT: std::sync::OnceLock<LogFormat> = std::sync::OnceLock::new();

/// Whether log lines are JSON: as configured once [`init`] ran, else as
/// `EMBER_LOG__FORMAT` says (a configuration that failed to load still
/// names the format its deployment expects).
pub fn json_logging() -> bool {
    match FORMAT.get() {
        Some(format) => *format == LogFormat::Json,
        None => std::env::var("EMBER_LOG__FORMAT")
            .is_ok_and(|format| format.eq_ignore_ascii_case("json")),
    }
}

/// The line a fatal error is reported with: JSON, like every other line,
/// when logs are JSON; `error: …` otherwise.
pub fn fatal_line(message: &str) -> String {
    if json_logging() {
        serde_json::json!({
            "timestamp": chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Micros, true),
            "level": "ERROR",
            "message": message,
            "target": "ember",
        })
        .to_string()
    } else {
        format!("error: {message}")
    }
}

/// Installs the global subscriber. Calling it twice (tests) is harmless.
pub fn init(config: &LogConfig) {
    let _ = FORMAT.set(config.format);
    let filter = EnvFilter::try_from_default_env()
        .or_else(|_| EnvFilter::try_new(&config.filter))
        .unwrap_or_else(|_| EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_writer(std::io::stderr);
    // An error here only means a subscriber is already installed.
    let _ = match config.format {
        LogFormat::Text => builder.with_target(false).try_init(),
        LogFormat::Json => builder.json().flatten_event(true).try_init(),
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    // figment's Jail dictates the closure's error type.
    #[allow(clippy::result_large_err)]
    fn a_fatal_line_is_json_when_logs_are() {
        figment::Jail::expect_with(|jail| {
            jail.set_env("EMBER_LOG__FORMAT", "json");
            let line: serde_json::Value =
                serde_json::from_str(&fatal_line("config: bad")).expect("a JSON line");
            assert_eq!(line["level"], "ERROR");
            assert_eq!(line["message"], "config: bad");
            jail.set_env("EMBER_LOG__FORMAT", "text");
            assert_eq!(fatal_line("config: bad"), "error: config: bad");
            Ok(())
        });
    }
}
