//! Password hashing: Argon2id with the parameters OWASP recommends
//! (19 MiB, two passes, one lane), a random salt per password, stored as a
//! PHC string (`$argon2id$v=19$m=19456,t=2,p=1$…`) so the parameters can
//! change later without invalidating old hashes. A password is never stored
//! or logged in clear.

use argon2::password_hash::{PasswordHash, PasswordHasher, PasswordVerifier, SaltString};
use argon2::{Algorithm, Argon2, Params, Version};

/// The shortest password accepted.
pub const MIN_PASSWORD_LENGTH: usize = 8;
/// The longest: hashing is the costly part of a request, so bound it.
pub const MAX_PASSWORD_LENGTH: usize = 1024;

fn hasher() -> Argon2<'static> {
    // 19 MiB, t = 2, p = 1: OWASP's first Argon2id configuration; about
    // 20 ms on one core of the development machine (`ember bench identity`).
    let params = Params::new(19 * 1024, 2, 1, None).unwrap_or_default();
    Argon2::new(Algorithm::Argon2id, Version::V0x13, params)
}

/// Checks a new password's length, naming what is wrong.
pub fn check_new(password: &str) -> Result<(), String> {
    let length = password.chars().count();
    if length < MIN_PASSWORD_LENGTH {
        return Err(format!(
            "the password must have at least {MIN_PASSWORD_LENGTH} characters"
        ));
    }
    if password.len() > MAX_PASSWORD_LENGTH {
        return Err(format!(
            "the password must have at most {MAX_PASSWORD_LENGTH} bytes"
        ));
    }
    Ok(())
}

/// The PHC string of `password` with a fresh random salt.
pub fn hash(password: &str) -> Result<String, String> {
    use rand::RngCore;
    let mut salt = [0u8; 16];
    rand::rng().fill_bytes(&mut salt);
    let salt = SaltString::encode_b64(&salt).map_err(|error| format!("salt: {error}"))?;
    hasher()
        .hash_password(password.as_bytes(), &salt)
        .map(|hash| hash.to_string())
        .map_err(|error| format!("cannot hash the password: {error}"))
}

/// Whether `password` matches `stored` (a PHC string). A malformed stored
/// hash matches nothing.
pub fn verify(password: &str, stored: &str) -> bool {
    if password.len() > MAX_PASSWORD_LENGTH {
        return false;
    }
    match PasswordHash::new(stored) {
        Ok(parsed) => hasher()
            .verify_password(password.as_bytes(), &parsed)
            .is_ok(),
        Err(_) => false,
    }
}

/// Spends the time a verification would, for callers that found no user:
/// the answer time then does not tell which user names exist.
pub fn verify_nothing(password: &str) {
    static DUMMY: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    let dummy = DUMMY.get_or_init(|| hash("not-a-password-of-anyone").unwrap_or_default());
    let _ = verify(password, dummy);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hash_verifies_its_password_only_and_holds_no_clear_text() {
        let stored = hash("correct horse battery").expect("hashed");
        assert!(
            stored.starts_with("$argon2id$v=19$m=19456,t=2,p=1$"),
            "{stored}"
        );
        assert!(!stored.contains("correct horse"));
        assert!(verify("correct horse battery", &stored));
        assert!(!verify("correct horse battery!", &stored));
        assert!(!verify("correct horse battery", "not a hash"));
        assert_ne!(
            stored,
            hash("correct horse battery").expect("hashed"),
            "salted"
        );
    }

    #[test]
    fn short_and_huge_passwords_are_refused_by_name() {
        assert!(
            check_new("short")
                .expect_err("short")
                .contains("at least 8")
        );
        assert!(
            check_new(&"x".repeat(2000))
                .expect_err("long")
                .contains("at most")
        );
        assert!(check_new("long enough").is_ok());
    }
}
