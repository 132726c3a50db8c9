//! A headless Chromium driven through WebDriver (Debian's `chromium` and
//! `chromedriver`): a small W3C WebDriver client over HTTP — a session,
//! elements, script, screenshots and the browser's console log — for the
//! console's benchmark (`ember bench console`) and its browser tests.

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
#[derive(Clone, Debug)]
pub struct Element {
    id: String,
}

/// Where Chromium and chromedriver are, if this machine has them.
pub fn programs() -> Option<(String, String)> {
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

/// The Tab key, for [`Browser::keys`].
pub const TAB: char = '\u{E004}';
/// The Enter key, for [`Browser::keys`].
pub const ENTER: char = '\u{E007}';

/// Why this machine cannot run the browser, for messages.
pub const NO_BROWSER: &str = "no chromium and chromedriver in /usr/bin \
    (apt-get install chromium chromium-driver; ./scripts/test installs them)";

impl Browser {
    /// A new headless session with a window of `width`×`height`.
    pub async fn start(width: u32, height: u32) -> Result<Browser, String> {
        let (chromium, chromedriver) = programs().ok_or(NO_BROWSER)?;
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|listener| listener.local_addr())
            .map_err(|error| format!("no free port for chromedriver: {error}"))?
            .port();
        let mut driver = Command::new(chromedriver)
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|error| format!("chromedriver does not start: {error}"))?;
        let http = reqwest::Client::new();
        let base = format!("http://127.0.0.1:{port}");
        let deadline = Instant::now() + Duration::from_secs(20);
        while http.get(format!("{base}/status")).send().await.is_err() {
            if Instant::now() > deadline {
                let _ = driver.kill();
                return Err("chromedriver did not answer within 20 s".to_owned());
            }
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
        let started: Result<Value, String> = async {
            http.post(format!("{base}/session"))
                .json(&capabilities)
                .send()
                .await
                .map_err(|error| error.to_string())?
                .json()
                .await
                .map_err(|error| error.to_string())
        }
        .await;
        let session = started
            .as_ref()
            .ok()
            .and_then(|answer| answer["value"]["sessionId"].as_str());
        let Some(session) = session else {
            let _ = driver.kill();
            return Err(format!("chromedriver started no session: {started:?}"));
        };
        Ok(Browser {
            session: format!("{base}/session/{session}"),
            http,
            driver,
        })
    }

    async fn call(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<Value>,
    ) -> Result<Value, String> {
        let mut request = self
            .http
            .request(method.clone(), format!("{}{path}", self.session));
        if let Some(body) = body {
            request = request.json(&body);
        }
        let answer: Value = request
            .send()
            .await
            .map_err(|error| format!("{method} {path}: {error}"))?
            .json()
            .await
            .map_err(|error| format!("{method} {path}: {error}"))?;
        if let Some(error) = answer["value"]["error"].as_str() {
            return Err(format!(
                "{method} {path}: {error}: {}",
                answer["value"]["message"]
            ));
        }
        Ok(answer["value"].clone())
    }

    pub async fn goto(&self, url: &str) -> Result<(), String> {
        self.call(reqwest::Method::POST, "/url", Some(json!({"url": url})))
            .await
            .map(drop)
    }

    /// The elements matching `css` now (none is fine).
    pub async fn find_all(&self, css: &str) -> Result<Vec<Element>, String> {
        let found = self
            .call(
                reqwest::Method::POST,
                "/elements",
                Some(json!({"using": "css selector", "value": css})),
            )
            .await?;
        Ok(found
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|element| element[ELEMENT].as_str())
            .map(|id| Element { id: id.to_owned() })
            .collect())
    }

    /// The first element matching `css`, waited for up to `timeout`.
    pub async fn wait_for(&self, css: &str, timeout: Duration) -> Result<Element, String> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(element) = self.find_all(css).await?.into_iter().next() {
                return Ok(element);
            }
            if Instant::now() > deadline {
                return Err(format!("no element {css} within {timeout:?}"));
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Waits until `script` (a function body) returns something truthy,
    /// asking every `every`; returns it.
    pub async fn wait_until(
        &self,
        what: &str,
        script: &str,
        timeout: Duration,
        every: Duration,
    ) -> Result<Value, String> {
        let deadline = Instant::now() + timeout;
        loop {
            let value = self.execute(script, json!([])).await?;
            let truthy = !matches!(&value, Value::Null | Value::Bool(false))
                && value != json!("")
                && value != json!(0);
            if truthy {
                return Ok(value);
            }
            if Instant::now() > deadline {
                return Err(format!("{what}: not within {timeout:?} (last: {value})"));
            }
            tokio::time::sleep(every).await;
        }
    }

    /// Runs `script` (a function body; `arguments` holds `args`) in the page.
    pub async fn execute(&self, script: &str, args: Value) -> Result<Value, String> {
        self.call(
            reqwest::Method::POST,
            "/execute/sync",
            Some(json!({"script": script, "args": args})),
        )
        .await
    }

    pub async fn click(&self, element: &Element) -> Result<(), String> {
        self.call(
            reqwest::Method::POST,
            &format!("/element/{}/click", element.id),
            Some(json!({})),
        )
        .await
        .map(drop)
    }

    /// Types `text` into `element` (a file input takes a file's path).
    pub async fn type_into(&self, element: &Element, text: &str) -> Result<(), String> {
        self.call(
            reqwest::Method::POST,
            &format!("/element/{}/value", element.id),
            Some(json!({"text": text})),
        )
        .await
        .map(drop)
    }

    /// Presses the keys of `text` on whatever has the focus, as a person
    /// at the keyboard does (`TAB` and `ENTER` are keys too).
    pub async fn keys(&self, text: &str) -> Result<(), String> {
        let actions: Vec<Value> = text
            .chars()
            .flat_map(|key| {
                let key = key.to_string();
                [
                    json!({"type": "keyDown", "value": key}),
                    json!({"type": "keyUp", "value": key}),
                ]
            })
            .collect();
        self.call(
            reqwest::Method::POST,
            "/actions",
            Some(json!({"actions": [{"type": "key", "id": "keyboard", "actions": actions}]})),
        )
        .await
        .map(drop)
    }

    /// A PNG of the window.
    pub async fn screenshot(&self) -> Result<Vec<u8>, String> {
        use base64::Engine as _;
        let picture = self.call(reqwest::Method::GET, "/screenshot", None).await?;
        let encoded = picture.as_str().ok_or("no screenshot in the answer")?;
        base64::engine::general_purpose::STANDARD
            .decode(encoded)
            .map_err(|error| format!("a screenshot that is not base64: {error}"))
    }

    /// What the page logged at SEVERE (errors: failed loads, exceptions,
    /// CSP refusals) since the last call.
    pub async fn console_errors(&self) -> Result<Vec<String>, String> {
        let entries = self
            .call(
                reqwest::Method::POST,
                "/se/log",
                Some(json!({"type": "browser"})),
            )
            .await?;
        Ok(entries
            .as_array()
            .into_iter()
            .flatten()
            .filter(|entry| entry["level"] == "SEVERE")
            .map(|entry| entry["message"].as_str().unwrap_or_default().to_owned())
            .collect())
    }

    pub async fn resize(&self, width: u32, height: u32) -> Result<(), String> {
        self.call(
            reqwest::Method::POST,
            "/window/rect",
            Some(json!({"width": width, "height": height})),
        )
        .await
        .map(drop)
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        // Ending the session closes Chromium; chromedriver goes with it.
        let session = self.session.clone();
        let _ = std::thread::spawn(move || {
            let Ok(runtime) = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            else {
                return;
            };
            runtime.block_on(async {
                let _ = reqwest::Client::new().delete(session).send().await;
            });
        })
        .join();
        let _ = self.driver.kill();
        let _ = self.driver.wait();
    }
}
