//! A headless Chromium driven through WebDriver (Debian's `chromium` and
//! `chromedriver`), for the console's tests: a small W3C WebDriver client
//! over HTTP — sessions, elements, script, screenshots and the browser's
//! console log.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

/// The key a W3C WebDriver element reference is stored under.
const ELEMENT: &str = "element-6066-11e4-a52e-4f735466cecf";

/// A browser session, and the chromedriver serving it (stopped on drop).
pub struct Browser {
    http: reqwest::Client,
    session: String,
    driver: Child,
}

/// An element of the current page.
#[derive(Clone)]
pub struct Element {
    id: String,
}

/// Where Chromium and chromedriver are, if this machine has them.
fn programs() -> Option<(String, String)> {
    let find = |names: &[&str]| {
        names
            .iter()
            .map(|name| format!("/usr/bin/{name}"))
            .find(|path| Path::new(path).exists())
    };
    Some((
        find(&["chromium", "chromium-browser", "google-chrome"])?,
        find(&["chromedriver"])?,
    ))
}

impl Browser {
    /// A new headless session with a window of `width`×`height`; `None`
    /// (after saying so loudly) when this machine has no Chromium and
    /// chromedriver — unless `EMBER_TEST_REQUIRE_BROWSER=1` (as CI sets),
    /// then the test fails.
    pub async fn start(width: u32, height: u32) -> Option<Browser> {
        let Some((chromium, chromedriver)) = programs() else {
            let reason = "no chromium and chromedriver in /usr/bin \
                (apt-get install chromium chromium-driver; ./scripts/test installs them)";
            if std::env::var("EMBER_TEST_REQUIRE_BROWSER").as_deref() == Ok("1") {
                panic!("EMBER_TEST_REQUIRE_BROWSER=1 but {reason}");
            }
            eprintln!("!!! SKIPPED: the console's browser test needs a browser: {reason}");
            return None;
        };
        let port = super::deployment::free_port();
        let driver = Command::new(chromedriver)
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("chromedriver starts");
        let http = reqwest::Client::new();
        let base = format!("http://127.0.0.1:{port}");
        let deadline = Instant::now() + Duration::from_secs(20);
        while http.get(format!("{base}/status")).send().await.is_err() {
            assert!(
                Instant::now() < deadline,
                "chromedriver did not answer within 20 s"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let capabilities = json!({"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "goog:loggingPrefs": {"browser": "ALL"},
            "goog:chromeOptions": {
                "binary": chromium,
                "args": ["--headless=new", "--no-sandbox", "--disable-gpu",
                         "--disable-dev-shm-usage", format!("--window-size={width},{height}")],
            },
        }}});
        let answer: Value = http
            .post(format!("{base}/session"))
            .json(&capabilities)
            .send()
            .await
            .expect("chromedriver answers")
            .json()
            .await
            .expect("a JSON answer");
        let session = answer["value"]["sessionId"]
            .as_str()
            .unwrap_or_else(|| panic!("no session: {answer}"))
            .to_owned();
        Some(Browser {
            http,
            session: format!("{base}/session/{session}"),
            driver,
        })
    }

    async fn call(&self, method: reqwest::Method, path: &str, body: Option<Value>) -> Value {
        let mut request = self
            .http
            .request(method.clone(), format!("{}{path}", self.session));
        if let Some(body) = body {
            request = request.json(&body);
        }
        let answer: Value = request
            .send()
            .await
            .unwrap_or_else(|error| panic!("{method} {path}: {error}"))
            .json()
            .await
            .unwrap_or_else(|error| panic!("{method} {path}: {error}"));
        if let Some(error) = answer["value"]["error"].as_str() {
            panic!("{method} {path}: {error}: {}", answer["value"]["message"]);
        }
        answer["value"].clone()
    }

    pub async fn goto(&self, url: &str) {
        self.call(reqwest::Method::POST, "/url", Some(json!({"url": url})))
            .await;
    }

    /// The elements matching `css` now (none is fine).
    pub async fn find_all(&self, css: &str) -> Vec<Element> {
        let found = self
            .call(
                reqwest::Method::POST,
                "/elements",
                Some(json!({"using": "css selector", "value": css})),
            )
            .await;
        found
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|element| element[ELEMENT].as_str())
            .map(|id| Element { id: id.to_owned() })
            .collect()
    }

    /// The first element matching `css`, waited for up to `timeout`.
    pub async fn wait_for(&self, css: &str, timeout: Duration) -> Element {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(element) = self.find_all(css).await.into_iter().next() {
                return element;
            }
            if Instant::now() > deadline {
                self.screenshot("timed-out").await;
                panic!("no element {css} within {timeout:?}");
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Waits until `script` (a function body returning a value) returns
    /// something truthy; returns it.
    pub async fn wait_until(&self, what: &str, script: &str, timeout: Duration) -> Value {
        let deadline = Instant::now() + timeout;
        loop {
            let value = self.execute(script, json!([])).await;
            let truthy = !matches!(&value, Value::Null | Value::Bool(false))
                && value != json!("")
                && value != json!(0);
            if truthy {
                return value;
            }
            if Instant::now() > deadline {
                self.screenshot("timed-out").await;
                panic!("{what}: not within {timeout:?} (last: {value})");
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Runs `script` (a function body; `arguments` holds `args`) in the page.
    pub async fn execute(&self, script: &str, args: Value) -> Value {
        self.call(
            reqwest::Method::POST,
            "/execute/sync",
            Some(json!({"script": script, "args": args})),
        )
        .await
    }

    pub async fn click(&self, element: &Element) {
        self.call(
            reqwest::Method::POST,
            &format!("/element/{}/click", element.id),
            Some(json!({})),
        )
        .await;
    }

    /// Types `text` into `element` (a file input takes a file's path).
    pub async fn type_into(&self, element: &Element, text: &str) {
        self.call(
            reqwest::Method::POST,
            &format!("/element/{}/value", element.id),
            Some(json!({"text": text})),
        )
        .await;
    }

    pub async fn text(&self, element: &Element) -> String {
        let text = self
            .call(
                reqwest::Method::GET,
                &format!("/element/{}/text", element.id),
                None,
            )
            .await;
        text.as_str().unwrap_or_default().to_owned()
    }

    /// A DOM property of `element` (`disabled`, `value`, …).
    pub async fn property(&self, element: &Element, name: &str) -> Value {
        self.call(
            reqwest::Method::GET,
            &format!("/element/{}/property/{name}", element.id),
            None,
        )
        .await
    }

    /// Saves a PNG of the window as `target/console-screenshots/<name>.png`.
    pub async fn screenshot(&self, name: &str) {
        use base64::Engine as _;
        let picture = self.call(reqwest::Method::GET, "/screenshot", None).await;
        let Some(encoded) = picture.as_str() else {
            return;
        };
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/console-screenshots");
        std::fs::create_dir_all(&dir).expect("a screenshot directory");
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(encoded)
            .expect("base64 from chromedriver");
        std::fs::write(dir.join(format!("{name}.png")), bytes).expect("a screenshot written");
    }

    /// What the page logged at SEVERE (errors: failed loads, exceptions,
    /// CSP refusals) since the last call.
    pub async fn console_errors(&self) -> Vec<String> {
        let entries = self
            .call(
                reqwest::Method::POST,
                "/se/log",
                Some(json!({"type": "browser"})),
            )
            .await;
        entries
            .as_array()
            .into_iter()
            .flatten()
            .filter(|entry| entry["level"] == "SEVERE")
            .map(|entry| entry["message"].as_str().unwrap_or_default().to_owned())
            .collect()
    }

    pub async fn resize(&self, width: u32, height: u32) {
        self.call(
            reqwest::Method::POST,
            "/window/rect",
            Some(json!({"width": width, "height": height})),
        )
        .await;
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        // Ending the session closes Chromium; chromedriver goes with it.
        let session = self.session.clone();
        let _ = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("a runtime");
            runtime.block_on(async {
                let _ = reqwest::Client::new().delete(session).send().await;
            });
        })
        .join();
        let _ = self.driver.kill();
        let _ = self.driver.wait();
    }
}
