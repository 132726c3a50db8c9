//! How fast one address may ask the front door for tokens
//! (`POST /identity/v3/auth/tokens`): a token bucket per source address,
//! in this replica's memory. A caller past it gets 429 with `Retry-After`
//! before anything is read or verified, so a password flood costs the
//! gateway next to nothing and cannot slow other tenants down; together
//! with the lockout (see [`super::Lockout`]) it bounds how many passwords
//! anyone can try.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The rate one source may ask at: `per_second` on average, `burst` at
/// once. `per_second = 0` = no limit. Loopback sources (this host's own
/// tools, a reverse proxy beside the gateway, through which every client
/// would share one bucket) are not limited unless `loopback` says so.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LoginRate {
    pub per_second: f64,
    pub burst: f64,
    pub loopback: bool,
}

impl Default for LoginRate {
    /// Ten a second, thirty at once: far more than any client logs in, far
    /// less than a password flood (the probes tried ~73 a second).
    fn default() -> Self {
        LoginRate {
            per_second: 10.0,
            burst: 30.0,
            loopback: false,
        }
    }
}

/// Beyond this many remembered sources, the ones whose buckets are full
/// again (idle) are forgotten.
const REMEMBERED: usize = 10_000;

#[derive(Debug)]
struct Bucket {
    tokens: f64,
    at: Instant,
}

/// The buckets of every source.
#[derive(Debug)]
pub struct LoginThrottle {
    rate: LoginRate,
    buckets: Mutex<HashMap<IpAddr, Bucket>>,
}

impl LoginThrottle {
    pub fn new(rate: LoginRate) -> LoginThrottle {
        LoginThrottle {
            rate,
            buckets: Mutex::default(),
        }
    }

    /// Takes one request of `source` at `now`: `Ok` when it may go on,
    /// else how long until it may try again.
    pub fn take(&self, source: IpAddr, now: Instant) -> Result<(), Duration> {
        let LoginRate {
            per_second,
            burst,
            loopback,
        } = self.rate;
        if per_second <= 0.0 || (source.is_loopback() && !loopback) {
            return Ok(());
        }
        let Ok(mut buckets) = self.buckets.lock() else {
            return Ok(());
        };
        if buckets.len() >= REMEMBERED && !buckets.contains_key(&source) {
            buckets.retain(|_, bucket| {
                bucket.tokens + now.duration_since(bucket.at).as_secs_f64() * per_second < burst
            });
        }
        let bucket = buckets.entry(source).or_insert(Bucket {
            tokens: burst,
            at: now,
        });
        let refilled = now.duration_since(bucket.at).as_secs_f64() * per_second;
        bucket.tokens = (bucket.tokens + refilled).min(burst);
        bucket.at = now;
        if bucket.tokens >= 1.0 {
            bucket.tokens -= 1.0;
            Ok(())
        } else {
            Err(Duration::from_secs_f64((1.0 - bucket.tokens) / per_second))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_source_gets_its_burst_then_its_rate_and_others_are_not_touched() {
        let throttle = LoginThrottle::new(LoginRate {
            per_second: 2.0,
            burst: 3.0,
            loopback: false,
        });
        let (flood, other) = ("192.0.2.1".parse().unwrap(), "192.0.2.2".parse().unwrap());
        let start = Instant::now();
        for _ in 0..3 {
            assert_eq!(throttle.take(flood, start), Ok(()));
        }
        let wait = throttle.take(flood, start).expect_err("past the burst");
        assert!(
            wait > Duration::from_millis(400) && wait <= Duration::from_millis(500),
            "{wait:?}"
        );
        assert_eq!(throttle.take(other, start), Ok(()), "another address");
        // Half a second later, one more (two a second).
        let later = start + Duration::from_millis(500);
        assert_eq!(throttle.take(flood, later), Ok(()));
        assert!(throttle.take(flood, later).is_err());
    }

    #[test]
    fn no_rate_is_no_limit_and_idle_sources_are_forgotten() {
        let unlimited = LoginThrottle::new(LoginRate {
            per_second: 0.0,
            burst: 0.0,
            loopback: false,
        });
        let source = "192.0.2.1".parse().unwrap();
        for _ in 0..1000 {
            assert_eq!(unlimited.take(source, Instant::now()), Ok(()));
        }
        // Loopback is not limited unless asked.
        let local = LoginThrottle::new(LoginRate {
            per_second: 1.0,
            burst: 1.0,
            loopback: false,
        });
        for _ in 0..100 {
            assert_eq!(
                local.take("127.0.0.1".parse().unwrap(), Instant::now()),
                Ok(())
            );
        }
        let throttle = LoginThrottle::new(LoginRate::default());
        let start = Instant::now();
        for index in 0..REMEMBERED {
            let address = IpAddr::from(u32::try_from(index).unwrap().to_be_bytes());
            throttle.take(address, start).expect("first");
        }
        let later = start + Duration::from_secs(60);
        throttle
            .take("198.51.100.1".parse().unwrap(), later)
            .expect("a new source");
        assert_eq!(
            throttle.buckets.lock().unwrap().len(),
            1,
            "idle ones forgotten"
        );
    }
}
