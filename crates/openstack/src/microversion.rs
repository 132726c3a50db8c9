//! Microversions: the API version a call asks a service for. Ember asks
//! for the highest version it was written against that the service
//! speaks, and refuses a service that does not speak the lowest version
//! Ember needs, naming both.

use http::{HeaderName, HeaderValue};
use serde_json::Value;

use crate::error::{Error, Result, Service};

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Microversion {
    pub major: u32,
    pub minor: u32,
}

impl Microversion {
    pub const fn new(major: u32, minor: u32) -> Microversion {
        Microversion { major, minor }
    }

    /// `"2.79"` → 2.79; `""` and `"latest"` are not versions.
    pub fn parse(text: &str) -> Option<Microversion> {
        let (major, minor) = text.trim().split_once('.')?;
        Some(Microversion {
            major: major.parse().ok()?,
            minor: minor.parse().ok()?,
        })
    }

    /// The (lowest, highest) microversions a version document names: a
    /// `{"version": {…}}` document (Nova's at its endpoint) or the current
    /// entry of a `{"versions": […]}` list (Cinder's).
    pub fn range_of(document: &Value) -> Option<(Microversion, Microversion)> {
        let range = |version: &Value| {
            let highest = Microversion::parse(version.get("version")?.as_str()?)?;
            let lowest = version
                .get("min_version")
                .and_then(Value::as_str)
                .and_then(Microversion::parse)
                .unwrap_or(highest);
            Some((lowest, highest))
        };
        if let Some(version) = document.get("version") {
            return range(version);
        }
        let versions = document.get("versions")?.as_array()?;
        versions
            .iter()
            .filter(|version| version.get("status").and_then(Value::as_str) == Some("CURRENT"))
            .chain(versions.iter())
            .find_map(range)
    }

    /// The version to ask for: `wanted` or the highest the service speaks
    /// below it, if that is at least `least`.
    pub fn negotiate(
        service: Service,
        spoken: (Microversion, Microversion),
        least: Microversion,
        wanted: Microversion,
    ) -> Result<Microversion> {
        let (lowest, highest) = spoken;
        let chosen = wanted.min(highest);
        if chosen < least || chosen < lowest {
            return Err(Error::Unsupported {
                service,
                message: format!(
                    "speaks microversions {lowest} to {highest}; Ember needs at least {least}"
                ),
            });
        }
        Ok(chosen)
    }

    /// The headers that ask `service` for this version.
    pub fn headers(self, service: Service) -> Vec<(HeaderName, HeaderValue)> {
        let mut headers = Vec::with_capacity(2);
        let name = match service {
            Service::Compute => "compute",
            Service::BlockStorage => "volume",
            Service::Image => "image",
            Service::Network => "network",
            Service::Identity => "identity",
        };
        if let Ok(value) = HeaderValue::from_str(&format!("{name} {self}")) {
            headers.push((HeaderName::from_static("openstack-api-version"), value));
        }
        if service == Service::Compute
            && let Ok(value) = HeaderValue::from_str(&self.to_string())
        {
            headers.push((
                HeaderName::from_static("x-openstack-nova-api-version"),
                value,
            ));
        }
        headers
    }
}

impl std::fmt::Display for Microversion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{}", self.major, self.minor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn versions_parse_and_order_numerically() {
        assert_eq!(Microversion::parse("2.79"), Some(Microversion::new(2, 79)));
        assert!(Microversion::new(2, 100) > Microversion::new(2, 99));
        assert_eq!(Microversion::parse("latest"), None);
        assert_eq!(Microversion::new(3, 0).to_string(), "3.0");
    }

    #[test]
    fn version_documents_of_nova_and_cinder_are_read() {
        let nova = json!({"version": {"id": "v2.1", "status": "CURRENT", "version": "2.100", "min_version": "2.1"}});
        assert_eq!(
            Microversion::range_of(&nova),
            Some((Microversion::new(2, 1), Microversion::new(2, 100)))
        );
        let cinder = json!({"versions": [
            {"id": "v3.0", "status": "CURRENT", "version": "3.71", "min_version": "3.0"}
        ]});
        assert_eq!(
            Microversion::range_of(&cinder),
            Some((Microversion::new(3, 0), Microversion::new(3, 71)))
        );
        assert_eq!(Microversion::range_of(&json!({"versions": []})), None);
    }

    #[test]
    fn negotiation_takes_the_highest_both_speak_or_says_why_not() {
        let spoken = (Microversion::new(2, 1), Microversion::new(2, 100));
        let chosen = Microversion::negotiate(
            Service::Compute,
            spoken,
            Microversion::new(2, 73),
            Microversion::new(2, 96),
        )
        .expect("spoken");
        assert_eq!(chosen, Microversion::new(2, 96));
        let old = (Microversion::new(2, 1), Microversion::new(2, 60));
        let refused = Microversion::negotiate(
            Service::Compute,
            old,
            Microversion::new(2, 73),
            Microversion::new(2, 96),
        )
        .expect_err("too old");
        assert_eq!(
            refused.to_string(),
            "Nova (compute) speaks microversions 2.1 to 2.60; Ember needs at least 2.73"
        );
        let headers = chosen.headers(Service::Compute);
        assert_eq!(headers[0].1, "compute 2.96");
        assert_eq!(headers[1].1, "2.96");
    }
}
