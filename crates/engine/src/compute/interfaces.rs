//! Which of a machine's interfaces its network requests keep, which go,
//! and which requests need a new one: how a driver replugs a machine in
//! place ([`super::ComputeDriver::replug`]), with names already resolved to
//! ids. Heat matches a server's new `networks` the same way (a request
//! keeps an interface when everything it names — port, network, subnet,
//! fixed IP — is the interface's), so moving an entry from `network` to
//! `subnet`, or naming the port Nova made, keeps the port.

use serde_json::Value;

/// One request of a machine's `networks`, its names resolved to ids.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Wanted {
    pub port: Option<String>,
    pub network: Option<String>,
    pub subnet: Option<String>,
    pub fixed_ip: Option<String>,
}

/// One interface the machine has: its port, the port's network and
/// addresses (subnet, IP).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Interface {
    pub port: String,
    pub network: String,
    pub fixed_ips: Vec<(String, String)>,
}

impl Interface {
    /// A port as Neutron shows it (`network_id`, `fixed_ips`).
    pub fn of_port(id: &str, network_id: &Value, fixed_ips: &Value) -> Interface {
        let text = |value: &Value| value.as_str().unwrap_or_default().to_owned();
        Interface {
            port: id.to_owned(),
            network: text(network_id),
            fixed_ips: fixed_ips
                .as_array()
                .into_iter()
                .flatten()
                .map(|fixed| (text(&fixed["subnet_id"]), text(&fixed["ip_address"])))
                .collect(),
        }
    }

    /// Whether everything `wanted` names is this interface's.
    fn satisfies(&self, wanted: &Wanted) -> bool {
        let on_subnet = |subnet: &str| self.fixed_ips.iter().any(|(on, _)| on == subnet);
        let has_address = |address: &str| self.fixed_ips.iter().any(|(_, ip)| ip == address);
        wanted.port.as_deref().is_none_or(|port| port == self.port)
            && wanted
                .network
                .as_deref()
                .is_none_or(|network| network == self.network)
            && wanted.subnet.as_deref().is_none_or(on_subnet)
            && wanted.fixed_ip.as_deref().is_none_or(has_address)
    }
}

/// What a replug does: the interfaces to take off (indexes into the
/// machine's), and the requests to plug in (indexes into the wanted).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Replug {
    pub detach: Vec<usize>,
    pub attach: Vec<usize>,
}

/// Matches `wanted` against `interfaces`: the most specific requests first
/// (a port, then a fixed IP, then a subnet, then a network), each taking
/// the first interface left that satisfies it, so a request for "any port
/// on this network" never takes the interface a request for one address
/// needed. What nothing took is detached; what took nothing is attached.
pub fn plan(wanted: &[Wanted], interfaces: &[Interface]) -> Replug {
    let specificity = |wanted: &Wanted| {
        if wanted.port.is_some() {
            0
        } else if wanted.fixed_ip.is_some() {
            1
        } else if wanted.subnet.is_some() {
            2
        } else {
            3
        }
    };
    let mut order: Vec<usize> = (0..wanted.len()).collect();
    order.sort_by_key(|&index| specificity(&wanted[index]));
    let mut taken = vec![false; interfaces.len()];
    let mut attach = Vec::new();
    for index in order {
        let found = interfaces
            .iter()
            .enumerate()
            .find(|(at, interface)| !taken[*at] && interface.satisfies(&wanted[index]));
        match found {
            Some((at, _)) => taken[at] = true,
            None => attach.push(index),
        }
    }
    attach.sort_unstable();
    Replug {
        detach: (0..interfaces.len()).filter(|&at| !taken[at]).collect(),
        attach,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn interface(port: &str, network: &str, subnet: &str, ip: &str) -> Interface {
        Interface {
            port: port.into(),
            network: network.into(),
            fixed_ips: vec![(subnet.into(), ip.into())],
        }
    }

    fn wanted(port: &str, network: &str, subnet: &str, fixed_ip: &str) -> Wanted {
        let given = |text: &str| (!text.is_empty()).then(|| text.to_owned());
        Wanted {
            port: given(port),
            network: given(network),
            subnet: given(subnet),
            fixed_ip: given(fixed_ip),
        }
    }

    #[test]
    fn a_request_naming_what_the_interface_has_keeps_it() {
        let have = [interface("p0", "net", "sub", "10.0.0.5")];
        for request in [
            wanted("", "net", "", ""),
            wanted("", "", "sub", ""),
            wanted("p0", "", "", ""),
            wanted("", "net", "sub", ""),
            wanted("", "net", "", "10.0.0.5"),
        ] {
            assert_eq!(
                plan(std::slice::from_ref(&request), &have),
                Replug::default(),
                "{request:?}"
            );
        }
    }

    #[test]
    fn another_subnet_swaps_the_interface() {
        let have = [interface("p0", "net", "a", "11.11.11.3")];
        assert_eq!(
            plan(&[wanted("", "", "b", "")], &have),
            Replug {
                detach: vec![0],
                attach: vec![0],
            }
        );
    }

    #[test]
    fn specific_requests_choose_first() {
        // Three ports on one network: "any port on net" must not take the
        // one a fixed IP names, whatever the order of the requests.
        let have = [
            interface("p0", "net", "sub", "11.11.11.33"),
            interface("p1", "net", "sub", "11.11.11.4"),
            interface("p2", "net", "sub", "11.11.11.5"),
        ];
        let requests = [
            wanted("", "", "sub", ""),
            wanted("", "net", "", ""),
            wanted("", "net", "", "11.11.11.33"),
        ];
        assert_eq!(plan(&requests, &have), Replug::default());
    }

    #[test]
    fn fewer_requests_detach_and_more_attach() {
        let have = [
            interface("p0", "net", "sub", "10.0.0.5"),
            interface("p1", "other", "osub", "10.1.0.5"),
        ];
        assert_eq!(
            plan(&[wanted("", "other", "", "")], &have),
            Replug {
                detach: vec![0],
                attach: vec![],
            }
        );
        assert_eq!(
            plan(
                &[
                    wanted("", "net", "", ""),
                    wanted("", "other", "", ""),
                    wanted("p9", "", "", "")
                ],
                &have
            ),
            Replug {
                detach: vec![],
                attach: vec![2],
            }
        );
    }
}
