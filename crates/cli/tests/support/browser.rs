//! The console's tests' browser: `ember::browser::Browser`, whose failures
//! end the test with a screenshot of the moment (`timed-out.png` beside the
//! others in `target/console-screenshots/`).

use std::path::{Path, PathBuf};
use std::time::Duration;

use ember::browser::{self, Element};
use serde_json::Value;

pub struct Browser(browser::Browser);

/// Where screenshots go.
fn screenshots() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/console-screenshots")
}

impl Browser {
    /// A new headless session; `None` (after saying so loudly) when this
    /// machine has no Chromium and chromedriver — unless
    /// `EMBER_TEST_REQUIRE_BROWSER=1` (as CI sets): then the test fails.
    pub async fn start(width: u32, height: u32) -> Option<Browser> {
        if browser::programs().is_none() {
            if std::env::var("EMBER_TEST_REQUIRE_BROWSER").as_deref() == Ok("1") {
                panic!("EMBER_TEST_REQUIRE_BROWSER=1 but {}", browser::NO_BROWSER);
            }
            eprintln!(
                "!!! SKIPPED: the console's browser test needs a browser: {}",
                browser::NO_BROWSER
            );
            return None;
        }
        let session = browser::Browser::start(width, height)
            .await
            .unwrap_or_else(|error| panic!("the browser: {error}"));
        Some(Browser(session))
    }

    /// `result`'s value, or the test ends with a screenshot and the error.
    async fn sure<T>(&self, result: Result<T, String>) -> T {
        match result {
            Ok(value) => value,
            Err(error) => {
                self.screenshot("timed-out").await;
                panic!("{error}");
            }
        }
    }

    pub async fn goto(&self, url: &str) {
        let result = self.0.goto(url).await;
        self.sure(result).await
    }

    pub async fn find_all(&self, css: &str) -> Vec<Element> {
        let result = self.0.find_all(css).await;
        self.sure(result).await
    }

    pub async fn wait_for(&self, css: &str, timeout: Duration) -> Element {
        let result = self.0.wait_for(css, timeout).await;
        self.sure(result).await
    }

    pub async fn wait_until(&self, what: &str, script: &str, timeout: Duration) -> Value {
        let result = self
            .0
            .wait_until(what, script, timeout, Duration::from_millis(100))
            .await;
        self.sure(result).await
    }

    pub async fn execute(&self, script: &str, args: Value) -> Value {
        let result = self.0.execute(script, args).await;
        self.sure(result).await
    }

    pub async fn click(&self, element: &Element) {
        let result = self.0.click(element).await;
        self.sure(result).await
    }

    pub async fn type_into(&self, element: &Element, text: &str) {
        let result = self.0.type_into(element, text).await;
        self.sure(result).await
    }

    pub async fn keys(&self, text: &str) {
        let result = self.0.keys(text).await;
        self.sure(result).await
    }

    pub async fn console_errors(&self) -> Vec<String> {
        let result = self.0.console_errors().await;
        self.sure(result).await
    }

    pub async fn resize(&self, width: u32, height: u32) {
        let result = self.0.resize(width, height).await;
        self.sure(result).await
    }

    /// Saves a PNG of the window as `target/console-screenshots/<name>.png`
    /// (best effort: a test failing already keeps its own message).
    pub async fn screenshot(&self, name: &str) {
        if let Ok(picture) = self.0.screenshot().await {
            let dir = screenshots();
            if std::fs::create_dir_all(&dir).is_ok() {
                let _ = std::fs::write(dir.join(format!("{name}.png")), picture);
            }
        }
    }
}
