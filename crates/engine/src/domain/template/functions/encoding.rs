//! Functions that encode text: `digest` (hashes) and `make_url`
//! (percent-encoded URLs built from parts).

use md5::Md5;
use serde_json::Value;
use sha1::Sha1;
use sha2::{Digest, Sha224, Sha256, Sha384, Sha512};

use super::super::error::{TemplateError, describe_value, type_name};
use super::super::python_compat::{percent_quote, percent_quote_plus, python_str};
use super::{Resolver, fail};

const URL_SCHEMES_WITH_NETLOC: [&str; 26] = [
    "", "ftp", "http", "gopher", "nntp", "telnet", "imap", "wais", "file", "mms", "https", "shttp",
    "snews", "prospero", "rtsp", "rtsps", "rtspu", "rsync", "svn", "svn+ssh", "sftp", "nfs", "git",
    "git+ssh", "ws", "wss",
];

impl Resolver<'_> {
    pub(super) fn digest(&self, args: &Value, path: &str) -> Result<Value, TemplateError> {
        let usage = "digest takes a list [algorithm, value] of two strings";
        let Value::Array(items) = self.resolve_value(args, path)? else {
            return fail(path, usage);
        };
        let [Value::String(algorithm), Value::String(text)] = items.as_slice() else {
            return fail(path, usage);
        };
        // Heat hashes the latin-1 encoding of the value.
        let mut bytes = Vec::with_capacity(text.len());
        for character in text.chars() {
            match u8::try_from(u32::from(character)) {
                Ok(byte) => bytes.push(byte),
                Err(_) => {
                    return fail(
                        path,
                        format!(
                            "digest can only hash latin-1 text, and the value contains '{character}'"
                        ),
                    );
                }
            }
        }
        let hex = match algorithm.to_ascii_lowercase().as_str() {
            "md5" => hex_digest::<Md5>(&bytes),
            "sha1" => hex_digest::<Sha1>(&bytes),
            "sha224" => hex_digest::<Sha224>(&bytes),
            "sha256" => hex_digest::<Sha256>(&bytes),
            "sha384" => hex_digest::<Sha384>(&bytes),
            "sha512" => hex_digest::<Sha512>(&bytes),
            other => {
                return fail(
                    path,
                    format!(
                        "unknown digest algorithm '{other}', expected md5, sha1, sha224, sha256, sha384 or sha512"
                    ),
                );
            }
        };
        Ok(Value::String(hex))
    }

    pub(super) fn make_url(&self, args: &Value, path: &str) -> Result<Value, TemplateError> {
        const KEYS: [&str; 8] = [
            "scheme", "username", "password", "host", "port", "path", "query", "fragment",
        ];
        let Value::Object(arguments) = self.resolve_value(args, path)? else {
            return fail(path, "make_url takes a map of URL parts");
        };
        if let Some(unknown) = arguments.keys().find(|key| !KEYS.contains(&key.as_str())) {
            return fail(
                path,
                format!(
                    "unknown make_url argument '{unknown}', expected {}",
                    KEYS.join(", ")
                ),
            );
        }
        let text = |key: &str| -> Result<String, TemplateError> {
            match arguments.get(key) {
                None | Some(Value::Null) => Ok(String::new()),
                Some(Value::String(text)) => Ok(text.clone()),
                Some(other) => fail(
                    path,
                    format!(
                        "the make_url {key} must be a string, found a {}",
                        type_name(other)
                    ),
                ),
            }
        };
        let scheme = text("scheme")?;
        if scheme.contains(':') {
            return fail(
                path,
                format!("the make_url scheme '{scheme}' must not contain ':'"),
            );
        }
        let port = match arguments.get("port") {
            None | Some(Value::Null) => None,
            Some(port) => {
                let number = match port {
                    Value::Number(number) => number.as_i64(),
                    Value::String(text) => text.trim().parse::<i64>().ok(),
                    _ => None,
                };
                match number {
                    Some(number) if (1..=65535).contains(&number) => Some(number),
                    _ => {
                        return fail(
                            path,
                            format!(
                                "invalid make_url port {}, it must be an integer from 1 to 65535",
                                describe_value(port)
                            ),
                        );
                    }
                }
            }
        };

        let mut netloc = String::new();
        let username = percent_quote(&text("username")?, "");
        let password = percent_quote(&text("password")?, "");
        if !username.is_empty() || !password.is_empty() {
            netloc.push_str(&username);
            if !password.is_empty() {
                netloc.push(':');
                netloc.push_str(&password);
            }
            netloc.push('@');
        }
        let host = text("host")?;
        let host = host
            .strip_prefix('[')
            .and_then(|inner| inner.strip_suffix(']'))
            .unwrap_or(&host);
        let host = percent_quote(host, ":");
        if host.contains(':') {
            netloc.push_str(&format!("[{host}]"));
        } else {
            netloc.push_str(&host);
        }
        if let Some(port) = port {
            netloc.push_str(&format!(":{port}"));
        }

        let query = match arguments.get("query") {
            None | Some(Value::Null) => String::new(),
            Some(Value::Object(query)) => {
                let mut pairs = Vec::with_capacity(query.len());
                for (key, value) in query {
                    let Some(value) = python_str(value) else {
                        return fail(
                            path,
                            format!(
                                "make_url query values must be strings or numbers, {key} is a {}",
                                type_name(value)
                            ),
                        );
                    };
                    pairs.push(format!(
                        "{}={}",
                        percent_quote_plus(key),
                        percent_quote_plus(&value)
                    ));
                }
                pairs.join("&").replace("%2F", "/")
            }
            Some(other) => {
                return fail(
                    path,
                    format!(
                        "the make_url query must be a map, found a {}",
                        type_name(other)
                    ),
                );
            }
        };

        let mut url = percent_quote(&text("path")?, "/");
        if !netloc.is_empty() {
            if !url.is_empty() && !url.starts_with('/') {
                url.insert(0, '/');
            }
            url = format!("//{netloc}{url}");
        } else if url.starts_with("//")
            || (!scheme.is_empty()
                && URL_SCHEMES_WITH_NETLOC.contains(&scheme.as_str())
                && (url.is_empty() || url.starts_with('/')))
        {
            url = format!("//{url}");
        }
        if !scheme.is_empty() {
            url = format!("{scheme}:{url}");
        }
        if !query.is_empty() {
            url.push('?');
            url.push_str(&query);
        }
        let fragment = percent_quote(&text("fragment")?, "/");
        if !fragment.is_empty() {
            url.push('#');
            url.push_str(&fragment);
        }
        Ok(Value::String(url))
    }
}

fn hex_digest<Hasher: Digest>(bytes: &[u8]) -> String {
    let digest = Hasher::digest(bytes);
    digest.iter().map(|byte| format!("{byte:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::super::test_support::*;
    use serde_json::json;

    #[test]
    fn digest_hashes_with_each_algorithm() {
        let hash = |algorithm: &str, text: &str| ok(json!({"digest": [algorithm, text]}));
        assert_eq!(
            hash("md5", "abc"),
            json!("900150983cd24fb0d6963f7d28e17f72")
        );
        assert_eq!(
            hash("sha1", "abc"),
            json!("a9993e364706816aba3e25717850c26c9cd0d89d")
        );
        assert_eq!(
            hash("sha224", "abc"),
            json!("23097d223405d8228642a477bda255b32aadbce4bda0b3f7e36c9da7")
        );
        assert_eq!(
            hash("SHA256", "abc"),
            json!("ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        );
        assert_eq!(
            hash("sha384", "abc"),
            json!(
                "cb00753f45a35e8bb5a03d699ac65007272c32ab0eded1631a8b605a43ff5bed8086072ba1e7cc2358baeca134c825a7"
            )
        );
        assert_eq!(
            hash("sha512", "abc"),
            json!(
                "ddaf35a193617abacc417349ae20413112e6fa4e89a97ea20a9eeee64b55d39a2192992a274fc1a836ba3c23a3feebbd454d4423643ce80e2a9ac94fa54ca49f"
            )
        );
        // latin-1, not UTF-8: "é" is the single byte 0xe9.
        assert_eq!(hash("md5", "é"), json!("3406877694691ddd1dfb0aca54681407"));
    }

    #[test]
    fn digest_bad_input() {
        assert!(
            err(json!({"digest": "md5"}))
                .message
                .starts_with("digest takes a list")
        );
        assert!(
            err(json!({"digest": ["md5"]}))
                .message
                .starts_with("digest takes a list")
        );
        assert!(
            err(json!({"digest": ["md5", 5]}))
                .message
                .starts_with("digest takes a list")
        );
        assert!(
            err(json!({"digest": ["crc32", "x"]}))
                .message
                .contains("unknown digest algorithm 'crc32'")
        );
        assert!(
            err(json!({"digest": ["md5", "日本"]}))
                .message
                .contains("latin-1")
        );
    }

    #[test]
    fn make_url_builds_escaped_urls() {
        assert_eq!(
            ok(
                json!({"make_url": {"scheme": "https", "username": "a b", "password": "p@ss", "host": "example.com",
                "port": 8443, "path": "/x y/z", "query": {"q": "a/b c", "n": 1}, "fragment": "frag"}})
            ),
            json!("https://a%20b:p%40ss@example.com:8443/x%20y/z?q=a/b+c&n=1#frag")
        );
        assert_eq!(
            ok(
                json!({"make_url": {"scheme": "http", "host": "fd00::1", "port": "80", "path": "p"}})
            ),
            json!("http://[fd00::1]:80/p")
        );
        assert_eq!(
            ok(json!({"make_url": {"scheme": "file", "path": "/etc/hosts"}})),
            json!("file:///etc/hosts")
        );
    }

    #[test]
    fn make_url_bad_input() {
        assert!(
            err(json!({"make_url": "http://x"}))
                .message
                .contains("takes a map")
        );
        assert!(
            err(json!({"make_url": {"hostname": "x"}}))
                .message
                .contains("unknown make_url argument 'hostname'")
        );
        assert!(
            err(json!({"make_url": {"host": "x", "port": 0}}))
                .message
                .contains("invalid make_url port 0")
        );
        assert!(
            err(json!({"make_url": {"host": "x", "port": "http"}}))
                .message
                .contains("invalid make_url port")
        );
        assert!(
            err(json!({"make_url": {"scheme": "a:b"}}))
                .message
                .contains("must not contain ':'")
        );
        assert!(
            err(json!({"make_url": {"host": 5}}))
                .message
                .contains("host must be a string")
        );
        assert!(
            err(json!({"make_url": {"query": [1]}}))
                .message
                .contains("query must be a map")
        );
    }
}
