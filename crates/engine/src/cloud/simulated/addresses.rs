//! Addresses as Neutron hands them out: a subnet's CIDR, its gateway and
//! allocation pools, and the next free address of a pool — IPv4 and IPv6
//! alike, as integers.

use std::collections::BTreeSet;
use std::net::IpAddr;

/// A subnet's range: `network/prefix`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cidr {
    pub network: IpAddr,
    pub prefix: u8,
}

impl Cidr {
    /// Parses `a.b.c.d/n` or `x::/n`, naming what is wrong.
    pub fn parse(text: &str) -> Result<Cidr, String> {
        let invalid = || format!("'{text}' is not a valid CIDR");
        let (address, prefix) = text.split_once('/').ok_or_else(invalid)?;
        let address: IpAddr = address.trim().parse().map_err(|_| invalid())?;
        let prefix: u8 = prefix.trim().parse().map_err(|_| invalid())?;
        if prefix > bits(address) {
            return Err(invalid());
        }
        // Neutron keeps the network address, whatever host bits were given.
        let network = from_number(address, to_number(address) & mask(address, prefix));
        Ok(Cidr { network, prefix })
    }

    pub fn version(&self) -> u8 {
        match self.network {
            IpAddr::V4(_) => 4,
            IpAddr::V6(_) => 6,
        }
    }

    pub fn contains(&self, address: IpAddr) -> bool {
        address.is_ipv4() == self.network.is_ipv4()
            && to_number(address) & mask(address, self.prefix) == to_number(self.network)
    }

    /// The first and last address hosts may have (IPv4 keeps its network
    /// and broadcast addresses out; IPv6 only the subnet-router anycast).
    pub fn host_range(&self) -> (u128, u128) {
        let first = to_number(self.network);
        let size_bits = bits(self.network) - self.prefix;
        let last = first + ((1_u128 << size_bits) - 1).min(u128::MAX - first);
        match self.network {
            IpAddr::V4(_) if size_bits >= 2 => (first + 1, last - 1),
            IpAddr::V4(_) => (first, last),
            IpAddr::V6(_) => (first + 1, last),
        }
    }

    /// Neutron's default gateway: the first host address.
    pub fn default_gateway(&self) -> IpAddr {
        from_number(self.network, self.host_range().0)
    }

    pub fn address(&self, number: u128) -> IpAddr {
        from_number(self.network, number)
    }
}

impl std::fmt::Display for Cidr {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(formatter, "{}/{}", self.network, self.prefix)
    }
}

/// An allocation pool: `start`..=`end`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pool {
    pub start: u128,
    pub end: u128,
}

/// The pools of `cidr` when none are given: the host range without the
/// gateway (Neutron's own rule).
pub fn default_pools(cidr: &Cidr, gateway: Option<IpAddr>) -> Vec<Pool> {
    let (first, last) = cidr.host_range();
    let Some(gateway) = gateway.filter(|gateway| cidr.contains(*gateway)) else {
        return vec![Pool {
            start: first,
            end: last,
        }];
    };
    let gateway = to_number(gateway);
    let mut pools = Vec::new();
    if gateway > first {
        pools.push(Pool {
            start: first,
            end: gateway - 1,
        });
    }
    if gateway < last {
        pools.push(Pool {
            start: gateway + 1,
            end: last,
        });
    }
    pools
}

/// The lowest address of `pools` not in `taken`.
pub fn next_free(pools: &[Pool], taken: &BTreeSet<u128>) -> Option<u128> {
    for pool in pools {
        let mut candidate = pool.start;
        for used in taken.range(pool.start..=pool.end) {
            if *used != candidate {
                break;
            }
            candidate = candidate.checked_add(1)?;
        }
        if candidate <= pool.end {
            return Some(candidate);
        }
    }
    None
}

pub fn to_number(address: IpAddr) -> u128 {
    match address {
        IpAddr::V4(v4) => u128::from(u32::from(v4)),
        IpAddr::V6(v6) => u128::from(v6),
    }
}

fn from_number(like: IpAddr, number: u128) -> IpAddr {
    match like {
        IpAddr::V4(_) => IpAddr::V4(std::net::Ipv4Addr::from(number as u32)),
        IpAddr::V6(_) => IpAddr::V6(std::net::Ipv6Addr::from(number)),
    }
}

fn bits(address: IpAddr) -> u8 {
    if address.is_ipv4() { 32 } else { 128 }
}

fn mask(address: IpAddr, prefix: u8) -> u128 {
    let width = bits(address);
    if prefix == 0 {
        return 0;
    }
    let all = if width == 128 {
        u128::MAX
    } else {
        (1_u128 << width) - 1
    };
    all & !((1_u128 << (width - prefix)) - 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cidr_keeps_its_network_and_knows_its_hosts() {
        let cidr = Cidr::parse("10.0.0.7/24").expect("valid");
        assert_eq!(cidr.to_string(), "10.0.0.0/24");
        assert_eq!(cidr.default_gateway().to_string(), "10.0.0.1");
        assert!(cidr.contains("10.0.0.254".parse().unwrap()));
        assert!(!cidr.contains("10.0.1.1".parse().unwrap()));
        let v6 = Cidr::parse("fd00:1::/64").expect("valid");
        assert_eq!(v6.default_gateway().to_string(), "fd00:1::1");
        assert!(Cidr::parse("10.0.0.0/33").is_err());
        assert!(Cidr::parse("nonsense").is_err());
    }

    #[test]
    fn addresses_are_handed_out_lowest_first_around_the_gateway() {
        let cidr = Cidr::parse("192.168.5.0/29").expect("valid");
        let pools = default_pools(&cidr, Some(cidr.default_gateway()));
        let mut taken = BTreeSet::new();
        let mut given = Vec::new();
        while let Some(next) = next_free(&pools, &taken) {
            taken.insert(next);
            given.push(cidr.address(next).to_string());
        }
        assert_eq!(
            given,
            [
                "192.168.5.2",
                "192.168.5.3",
                "192.168.5.4",
                "192.168.5.5",
                "192.168.5.6"
            ]
        );
    }
}
