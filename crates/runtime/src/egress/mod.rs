//! Where tenant-supplied URLs may lead (lifecycle hook webhooks): never to
//! Ember's own machines or their neighbours unless an operator says so.
//! A URL's host is resolved and **every** address it resolves to is
//! vetted: loopback, link-local (the cloud metadata service at
//! 169.254.169.254 among them), unspecified, multicast, broadcast and
//! reserved addresses are refused always, private ranges (10/8,
//! 172.16/12, 192.168/16, 100.64/10, fc00::/7) unless
//! `webhook_targets.allow_private_addresses`; an operator's allow-list
//! (CIDRs, or `host:port`) admits targets the rules would refuse.
//!
//! The check is made when a URL is accepted (a 400 naming the host and
//! why) and again by the connection itself ([`connector`]): the client
//! connects only to the addresses it vetted, so a name that resolves to a
//! public address at creation and to 127.0.0.1 later (DNS rebinding)
//! reaches nothing. Redirects are never followed ([`crate::https`]).

pub mod connector;

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::config::Validate;

/// `[webhook_targets]`: where tenant webhooks may point. Read by the
/// engine (a hook's URL is checked when its policy is made) and by the
/// lifecycle-hook (again at every delivery).
///
/// ```toml
/// [webhook_targets]
/// allow_private_addresses = false
/// allow = ["10.20.0.0/16", "hooks.internal.example:8443", "127.0.0.1:9000"]
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct WebhookTargetsSection {
    /// Whether private ranges (10/8, 172.16/12, 192.168/16, 100.64/10,
    /// fc00::/7) may be targets. Off: a tenant's URL cannot reach the
    /// deployment's own network.
    pub allow_private_addresses: bool,
    /// Targets allowed whatever the rules say: a CIDR (`10.1.0.0/16`,
    /// `::1/128`, or one address) admits its addresses on any port; a
    /// `host:port` (`127.0.0.1:9000`, `[::1]:9000`, `hooks.example:443`)
    /// admits that host name or address on that port only.
    pub allow: Vec<String>,
}

impl Validate for WebhookTargetsSection {
    fn validate(&self, problems: &mut Vec<String>) {
        for entry in &self.allow {
            if let Err(problem) = AllowEntry::parse(entry) {
                problems.push(format!("webhook_targets.allow: {problem}"));
            }
        }
    }
}

impl WebhookTargetsSection {
    /// The rules this section describes (entries that do not parse were
    /// reported by [`Validate`] and are left out).
    pub fn rules(&self) -> EgressRules {
        EgressRules {
            allow_private_addresses: self.allow_private_addresses,
            allow: self
                .allow
                .iter()
                .filter_map(|entry| AllowEntry::parse(entry).ok())
                .collect(),
        }
    }
}

/// One allow-list entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AllowEntry {
    /// Addresses within `network/prefix`, any port.
    Network { network: IpAddr, prefix: u8 },
    /// A host (a name, lower case, or an address) on one port.
    Endpoint { host: String, port: u16 },
}

impl AllowEntry {
    pub fn parse(entry: &str) -> Result<AllowEntry, String> {
        let entry = entry.trim();
        if let Some((address, prefix)) = entry.split_once('/') {
            let network: IpAddr = address
                .parse()
                .map_err(|_| format!("{entry:?}: {address:?} is not an IP address"))?;
            let longest = if network.is_ipv4() { 32 } else { 128 };
            let prefix: u8 = prefix
                .parse()
                .ok()
                .filter(|prefix| *prefix <= longest)
                .ok_or_else(|| format!("{entry:?}: the prefix must be 0-{longest}"))?;
            return Ok(AllowEntry::Network { network, prefix });
        }
        if let Ok(address) = entry.parse::<IpAddr>() {
            let prefix = if address.is_ipv4() { 32 } else { 128 };
            return Ok(AllowEntry::Network {
                network: address,
                prefix,
            });
        }
        if let Ok(socket) = entry.parse::<SocketAddr>() {
            return Ok(AllowEntry::Endpoint {
                host: socket.ip().to_string(),
                port: socket.port(),
            });
        }
        let refused = || {
            format!(
                "{entry:?} is neither a CIDR (10.0.0.0/8), an address, nor host:port (hooks.example:443)"
            )
        };
        let (host, port) = entry.rsplit_once(':').ok_or_else(refused)?;
        let port: u16 = port.parse().map_err(|_| refused())?;
        let valid_name = !host.is_empty()
            && host
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '_'));
        if !valid_name {
            return Err(refused());
        }
        Ok(AllowEntry::Endpoint {
            host: host.to_ascii_lowercase(),
            port,
        })
    }

    fn admits(&self, host: &str, address: SocketAddr) -> bool {
        match self {
            AllowEntry::Network { network, prefix } => {
                within(canonical(address.ip()), canonical(*network), *prefix)
            }
            AllowEntry::Endpoint {
                host: allowed,
                port,
            } => {
                *port == address.port()
                    && (allowed.eq_ignore_ascii_case(host)
                        || allowed.parse::<IpAddr>().ok().map(canonical)
                            == Some(canonical(address.ip())))
            }
        }
    }
}

/// Whether `address` is within `network/prefix` (same family only).
fn within(address: IpAddr, network: IpAddr, prefix: u8) -> bool {
    match (address, network) {
        (IpAddr::V4(address), IpAddr::V4(network)) => {
            let mask = u32::MAX.checked_shl(32 - u32::from(prefix)).unwrap_or(0);
            u32::from(address) & mask == u32::from(network) & mask
        }
        (IpAddr::V6(address), IpAddr::V6(network)) => {
            let mask = u128::MAX.checked_shl(128 - u32::from(prefix)).unwrap_or(0);
            u128::from(address) & mask == u128::from(network) & mask
        }
        _ => false,
    }
}

/// An IPv6 address that carries an IPv4 one (`::ffff:127.0.0.1`,
/// `::127.0.0.1`) is judged as that IPv4 address.
fn canonical(address: IpAddr) -> IpAddr {
    match address {
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => {
                let segments = v6.segments();
                // IPv4-compatible (deprecated, still routed by some stacks).
                // (`::` and `::1` are IPv6's own unspecified and loopback.)
                if segments[..6].iter().all(|segment| *segment == 0)
                    && !v6.is_unspecified()
                    && !v6.is_loopback()
                {
                    let [.., a, b] = segments;
                    IpAddr::V4(Ipv4Addr::from((u32::from(a) << 16) | u32::from(b)))
                } else {
                    address
                }
            }
        },
        v4 => v4,
    }
}

/// What kind of internal address `address` is, when it is one: always
/// refused, or (for [`AddressKind::Private`]) refused unless allowed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AddressKind {
    Loopback,
    LinkLocal,
    Unspecified,
    Multicast,
    /// Broadcast, documentation, benchmarking and reserved ranges.
    Reserved,
    Private,
}

impl AddressKind {
    pub fn of(address: IpAddr) -> Option<AddressKind> {
        match canonical(address) {
            IpAddr::V4(v4) => {
                let [a, b, ..] = v4.octets();
                if v4.is_loopback() {
                    Some(AddressKind::Loopback)
                } else if v4.is_link_local() {
                    Some(AddressKind::LinkLocal)
                } else if v4.is_unspecified() || a == 0 {
                    Some(AddressKind::Unspecified)
                } else if v4.is_multicast() {
                    Some(AddressKind::Multicast)
                } else if v4.is_broadcast()
                    || v4.is_documentation()
                    || a >= 240
                    || (a == 198 && (b & 0xfe) == 18)
                    || (a == 192 && b == 0 && v4.octets()[2] == 0)
                {
                    Some(AddressKind::Reserved)
                } else if v4.is_private() || (a == 100 && (b & 0xc0) == 64) {
                    Some(AddressKind::Private)
                } else {
                    None
                }
            }
            IpAddr::V6(v6) => {
                let first = v6.segments()[0];
                if v6.is_loopback() {
                    Some(AddressKind::Loopback)
                } else if v6.is_unspecified() {
                    Some(AddressKind::Unspecified)
                } else if (first & 0xffc0) == 0xfe80 {
                    Some(AddressKind::LinkLocal)
                } else if v6.is_multicast() {
                    Some(AddressKind::Multicast)
                } else if (first & 0xfe00) == 0xfc00 || (first & 0xffc0) == 0xfec0 {
                    // Unique local (fc00::/7) and the old site-local.
                    Some(AddressKind::Private)
                } else if first == 0x2001 && v6.segments()[1] == 0x0db8 {
                    Some(AddressKind::Reserved)
                } else {
                    None
                }
            }
        }
    }

    fn describe(self) -> &'static str {
        match self {
            AddressKind::Loopback => "a loopback address",
            AddressKind::LinkLocal => "a link-local address (cloud metadata services live there)",
            AddressKind::Unspecified => "an unspecified address",
            AddressKind::Multicast => "a multicast address",
            AddressKind::Reserved => "a reserved or broadcast address",
            AddressKind::Private => {
                "a private address (webhook_targets.allow_private_addresses is off)"
            }
        }
    }
}

/// Why a URL may not be called.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EgressRefusal {
    /// The URL itself is not one Ember calls.
    #[error("webhook URL {url:?} {reason}")]
    BadUrl { url: String, reason: String },
    /// The host is (or resolves to) an address the rules refuse.
    #[error(
        "webhook host {host:?} {resolved}{address}, {why}: Ember does not call internal addresses \
         unless an operator allows them (webhook_targets.allow)",
        resolved = if host.parse::<IpAddr>().is_ok() || host.trim_matches(['[', ']']).parse::<IpAddr>().is_ok() { "is " } else { "resolves to " },
        why = kind.describe()
    )]
    Internal {
        host: String,
        address: IpAddr,
        kind: AddressKind,
    },
    /// The host could not be resolved (no vetting was possible).
    #[error("webhook host {host:?} cannot be resolved: {reason}")]
    Unresolved { host: String, reason: String },
}

/// The rules in force (see the module header). The default is the strict
/// one: nothing internal, nothing private, nothing allow-listed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EgressRules {
    pub allow_private_addresses: bool,
    pub allow: Vec<AllowEntry>,
}

/// How long resolving a webhook's host may take.
pub const RESOLVE_TIMEOUT: Duration = Duration::from_secs(5);

impl EgressRules {
    /// Whether `address` (one of `host`'s) may be called.
    pub fn vet_address(&self, host: &str, address: SocketAddr) -> Result<(), EgressRefusal> {
        if self.allow.iter().any(|entry| entry.admits(host, address)) {
            return Ok(());
        }
        match AddressKind::of(address.ip()) {
            None => Ok(()),
            Some(AddressKind::Private) if self.allow_private_addresses => Ok(()),
            Some(kind) => Err(EgressRefusal::Internal {
                host: host.to_owned(),
                address: address.ip(),
                kind,
            }),
        }
    }

    /// Resolves `host:port` and vets every address it resolves to: the
    /// addresses to connect to, or why none may be. A name that resolves
    /// to any refused address is refused whole (a mix of public and
    /// internal answers is how rebinding attacks start).
    pub async fn resolve(&self, host: &str, port: u16) -> Result<Vec<SocketAddr>, EgressRefusal> {
        let bare = host.trim_start_matches('[').trim_end_matches(']');
        let addresses: Vec<SocketAddr> = if let Ok(address) = bare.parse::<IpAddr>() {
            vec![SocketAddr::new(address, port)]
        } else {
            let lookup = tokio::net::lookup_host((bare, port));
            match tokio::time::timeout(RESOLVE_TIMEOUT, lookup).await {
                Ok(Ok(found)) => found.collect(),
                Ok(Err(error)) => {
                    return Err(EgressRefusal::Unresolved {
                        host: host.to_owned(),
                        reason: error.to_string(),
                    });
                }
                Err(_) => {
                    return Err(EgressRefusal::Unresolved {
                        host: host.to_owned(),
                        reason: format!("no answer within {} s", RESOLVE_TIMEOUT.as_secs()),
                    });
                }
            }
        };
        if addresses.is_empty() {
            return Err(EgressRefusal::Unresolved {
                host: host.to_owned(),
                reason: "no address".to_owned(),
            });
        }
        for address in &addresses {
            self.vet_address(bare, *address)?;
        }
        Ok(addresses)
    }

    /// Vets a URL as [`EgressRules::resolve`] does its host.
    pub async fn vet_url(&self, url: &str) -> Result<Vec<SocketAddr>, EgressRefusal> {
        let (host, port) = host_and_port(url)?;
        self.resolve(&host, port).await
    }
}

/// The host and port an `http://` or `https://` URL names.
pub fn host_and_port(url: &str) -> Result<(String, u16), EgressRefusal> {
    let bad = |reason: &str| EgressRefusal::BadUrl {
        url: url.to_owned(),
        reason: reason.to_owned(),
    };
    let uri: http::Uri = url.parse().map_err(|_| bad("is not a URL"))?;
    let default_port = match uri.scheme_str() {
        Some("http") => 80,
        Some("https") => 443,
        _ => return Err(bad("must be http:// or https://")),
    };
    if uri
        .authority()
        .is_some_and(|authority| authority.as_str().contains('@'))
    {
        return Err(bad("must not carry credentials (user@host)"));
    }
    let host = uri
        .host()
        .filter(|host| !host.is_empty())
        .ok_or_else(|| bad("has no host"))?;
    Ok((
        host.to_ascii_lowercase(),
        uri.port_u16().unwrap_or(default_port),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn address(text: &str) -> IpAddr {
        text.parse().expect("an address")
    }

    #[test]
    fn internal_addresses_are_named_by_kind() {
        for (text, kind) in [
            ("127.0.0.1", AddressKind::Loopback),
            ("127.9.9.9", AddressKind::Loopback),
            ("::1", AddressKind::Loopback),
            ("::ffff:127.0.0.1", AddressKind::Loopback),
            ("169.254.169.254", AddressKind::LinkLocal),
            ("fe80::1", AddressKind::LinkLocal),
            ("0.0.0.0", AddressKind::Unspecified),
            ("::", AddressKind::Unspecified),
            ("224.0.0.1", AddressKind::Multicast),
            ("ff02::1", AddressKind::Multicast),
            ("255.255.255.255", AddressKind::Reserved),
            ("10.1.2.3", AddressKind::Private),
            ("172.16.0.1", AddressKind::Private),
            ("172.31.255.255", AddressKind::Private),
            ("192.168.1.1", AddressKind::Private),
            ("100.64.0.1", AddressKind::Private),
            ("fd00::1", AddressKind::Private),
            ("::ffff:10.0.0.1", AddressKind::Private),
        ] {
            assert_eq!(AddressKind::of(address(text)), Some(kind), "{text}");
        }
        for public in ["8.8.8.8", "172.32.0.1", "100.128.0.1", "2606:4700::1111"] {
            assert_eq!(AddressKind::of(address(public)), None, "{public}");
        }
    }

    #[test]
    fn the_default_refuses_internal_and_private_and_the_allow_list_admits() {
        let strict = EgressRules::default();
        let at = |text: &str, port| SocketAddr::new(address(text), port);
        let refusal = strict
            .vet_address("localhost", at("127.0.0.1", 80))
            .expect_err("loopback");
        let message = refusal.to_string();
        assert!(
            message.contains("\"localhost\" resolves to 127.0.0.1, a loopback address"),
            "{message}"
        );
        assert!(strict.vet_address("10.0.0.1", at("10.0.0.1", 80)).is_err());
        assert!(strict.vet_address("8.8.8.8", at("8.8.8.8", 80)).is_ok());

        let open = WebhookTargetsSection {
            allow_private_addresses: true,
            allow: vec![
                "127.0.0.1:9000".to_owned(),
                "[::1]:9001".to_owned(),
                "169.254.0.0/16".to_owned(),
                "Hooks.Internal:8443".to_owned(),
            ],
        }
        .rules();
        assert!(open.vet_address("10.0.0.1", at("10.0.0.1", 80)).is_ok());
        assert!(open.vet_address("127.0.0.1", at("127.0.0.1", 9000)).is_ok());
        assert!(
            open.vet_address("127.0.0.1", at("127.0.0.1", 9001))
                .is_err(),
            "another port of an allowed host:port"
        );
        assert!(open.vet_address("::1", at("::1", 9001)).is_ok());
        assert!(open.vet_address("x", at("169.254.169.254", 80)).is_ok());
        assert!(
            open.vet_address("hooks.internal", at("127.0.0.5", 8443))
                .is_ok()
        );
        assert!(
            open.vet_address("other.internal", at("127.0.0.5", 8443))
                .is_err()
        );
    }

    #[test]
    fn bad_allow_entries_are_reported_by_key() {
        let section = WebhookTargetsSection {
            allow_private_addresses: false,
            allow: vec![
                "10.0.0.0/33".to_owned(),
                "no port".to_owned(),
                "::1/128".to_owned(),
            ],
        };
        let mut problems = Vec::new();
        section.validate(&mut problems);
        assert_eq!(problems.len(), 2, "{problems:?}");
        assert!(
            problems
                .iter()
                .all(|problem| problem.starts_with("webhook_targets.allow: "))
        );
    }

    #[tokio::test]
    async fn urls_are_vetted_after_resolution() {
        let strict = EgressRules::default();
        for url in [
            "http://127.0.0.1:8080/hook",
            "http://[::1]:8080/hook",
            "http://169.254.169.254/latest/meta-data/",
            "http://localhost:8080/hook",
            "http://[::ffff:127.0.0.1]/hook",
            "https://0.0.0.0/",
        ] {
            let refusal = strict.vet_url(url).await.expect_err(url);
            assert!(
                matches!(refusal, EgressRefusal::Internal { .. }),
                "{url}: {refusal}"
            );
        }
        assert!(matches!(
            strict.vet_url("ftp://example.com/").await,
            Err(EgressRefusal::BadUrl { .. })
        ));
        assert!(matches!(
            strict.vet_url("http://user:pw@example.com/").await,
            Err(EgressRefusal::BadUrl { .. })
        ));
    }
}
