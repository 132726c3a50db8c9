//! `ember token issue`: mint a token with the deployment's signing key.

use std::path::{Path, PathBuf};
use std::time::Duration;

use ember_runtime::Identity;
use ember_runtime::auth::TokenSigner;

use crate::config::{self, EmberConfig, FlagOverrides, Secrets};
use crate::dev::DEV_SECRETS_FILE;
use crate::error::CliError;

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
    },
}

/// `data_dir` is the global `--data-dir`: an `ember dev` data directory
/// whose signing key to use when none is configured.
pub fn run(
    config_file: Option<&Path>,
    data_dir: Option<PathBuf>,
    command: TokenCommand,
) -> Result<(), CliError> {
    match command {
        TokenCommand::Issue {
            user,
            project,
            roles,
            ttl,
        } => {
            let config = config::load(
                config_file,
                &FlagOverrides {
                    data_dir,
                    gateway: None,
                    engine: None,
                },
            )
            .map_err(CliError::Usage)?;
            let signing_key = signing_key(&config, config_file)?;
            let ttl = ttl.unwrap_or(Duration::from_secs(config.auth.token_ttl_secs));
            // Revoking a user's or project's tokens is remembered this long.
            let longest = ember_api_gateway::identity::MAX_TOKEN_LIFETIME;
            if ttl > longest {
                return Err(CliError::Usage(format!(
                    "--ttl: at most {} days (a token must not outlive the revocations of its user or project)",
                    longest.as_secs() / 86_400
                )));
            }
            let identity = Identity::new(user, project, roles);
            let token = TokenSigner::new(&signing_key)
                .issue(&identity, ttl)
                .map_err(|error| error.to_string())?;
            println!("{token}");
            Ok(())
        }
    }
}

/// The key tokens are signed with: the configured `auth.signing_key`, else
/// the one an `ember dev` keeps in its data directory. Never a new one: a
/// token signed with a key no server has would be refused by every server.
fn signing_key(config: &EmberConfig, config_file: Option<&Path>) -> Result<String, CliError> {
    if let Some(key) = &config.auth.signing_key {
        return Ok(key.clone());
    }
    let dev_secrets = config.data_dir.join(DEV_SECRETS_FILE);
    let dev_secrets = std::path::absolute(&dev_secrets).unwrap_or(dev_secrets);
    match std::fs::read_to_string(&dev_secrets) {
        Ok(text) => serde_json::from_str::<Secrets>(&text)
            .map(|secrets| secrets.signing_key)
            .map_err(|error| CliError::Failed(format!("{}: {error}", dev_secrets.display()))),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
            let configuration = match config_file
                .map(Path::to_path_buf)
                .or_else(|| std::env::var_os("EMBER_CONFIG").map(Into::into))
            {
                Some(file) => format!("not in {}, ", file.display()),
                None => "no --config file, ".to_owned(),
            };
            Err(CliError::Usage(format!(
                "no signing key: auth.signing_key is not configured ({configuration}EMBER_AUTH__SIGNING_KEY not set) \
                 and there is no {} (not an `ember dev` data directory): set EMBER_AUTH__SIGNING_KEY to the \
                 deployment's key, or pass --data-dir of the running `ember dev`",
                dev_secrets.display()
            )))
        }
        Err(error) => Err(CliError::Failed(format!(
            "cannot read {}: {error}",
            dev_secrets.display()
        ))),
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
        return Err("a duration must be more than 0".to_owned());
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
