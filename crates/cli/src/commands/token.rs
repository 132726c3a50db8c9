//! `ember token issue`: mint a token with the deployment's signing key.

use std::path::Path;
use std::time::Duration;

use ember_runtime::Identity;
use ember_runtime::auth::TokenSigner;

use crate::config::{self, FlagOverrides};

#[derive(Debug, clap::Subcommand)]
pub enum TokenCommand {
    /// Print a signed token for a user in a project with roles
    Issue {
        #[arg(long)]
        user: String,
        #[arg(long)]
        project: String,
        /// A role; repeat for several (`admin` may act on every project)
        #[arg(long = "role", default_value = "member")]
        roles: Vec<String>,
        /// Lifetime such as 30m, 12h, 7d [default: auth.token_ttl_secs]
        #[arg(long, value_parser = parse_duration)]
        ttl: Option<Duration>,
        /// Data directory of an `ember dev` whose signing key to use
        #[arg(long, env = "EMBER_DATA_DIR")]
        data_dir: Option<std::path::PathBuf>,
    },
}

pub fn run(config_file: Option<&Path>, command: TokenCommand) -> Result<(), String> {
    match command {
        TokenCommand::Issue {
            user,
            project,
            roles,
            ttl,
            data_dir,
        } => {
            let config = config::load(
                config_file,
                &FlagOverrides {
                    data_dir,
                    gateway: None,
                    engine: None,
                },
            )?;
            // Outside dev the key comes from configuration; with `ember dev`
            // it is the one kept in its data directory.
            let secrets = crate::dev::dev_secrets(&config)?;
            let ttl = ttl.unwrap_or(Duration::from_secs(config.auth.token_ttl_secs));
            // Revoking a user's or project's tokens is remembered this long.
            let longest = ember_api_gateway::identity::MAX_TOKEN_LIFETIME;
            if ttl > longest {
                return Err(format!(
                    "--ttl: at most {} days (a token must not outlive the revocations of its user or project)",
                    longest.as_secs() / 86_400
                ));
            }
            let identity = Identity::new(user, project, roles);
            let token = TokenSigner::new(&secrets.signing_key)
                .issue(&identity, ttl)
                .map_err(|error| error.to_string())?;
            println!("{token}");
            Ok(())
        }
    }
}

/// Parses `90s`, `30m`, `12h`, `7d` or plain seconds.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let number: u64 = number
        .parse()
        .map_err(|_| format!("{text:?} is not a duration such as 30m, 12h or 7d"))?;
    let seconds = match unit {
        "" | "s" => number,
        "m" => number * 60,
        "h" => number * 3600,
        "d" => number * 86_400,
        other => {
            return Err(format!(
                "unknown unit {other:?} in {text:?}: use s, m, h or d"
            ));
        }
    };
    if seconds == 0 {
        return Err("a token lifetime must be more than 0".to_owned());
    }
    Ok(Duration::from_secs(seconds))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_parse_with_units() {
        assert_eq!(parse_duration("90"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration("30m"), Ok(Duration::from_secs(1800)));
        assert_eq!(parse_duration("12h"), Ok(Duration::from_secs(43_200)));
        assert_eq!(parse_duration("7d"), Ok(Duration::from_secs(604_800)));
        assert!(parse_duration("5w").unwrap_err().contains("unknown unit"));
        assert!(
            parse_duration("soon")
                .unwrap_err()
                .contains("not a duration")
        );
        assert!(parse_duration("0").unwrap_err().contains("more than 0"));
    }
}
