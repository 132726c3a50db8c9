//! The operator's side of the CLI: a gRPC connection to the gateway with a
//! token, found from flags, the environment or a running `ember dev`.

use std::path::PathBuf;

use tonic::transport::{Channel, Endpoint};

use crate::dev::DevCredentials;
use crate::error::CliError;

/// Which dev identity to use when no token is given.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum DevIdentity {
    Admin,
    Member,
}

/// The flags that say where a client command connects and as whom. They
/// are global: they may stand anywhere on the line (`ember --url X stack
/// list` and `ember stack list --url X` are the same).
#[derive(Debug, Clone, Default, clap::Args)]
pub struct ConnectArgs {
    /// Gateway URL [default: the running `ember dev`, else http://127.0.0.1:8004]
    #[arg(
        long,
        env = "EMBER_URL",
        global = true,
        help_heading = "Global options"
    )]
    pub url: Option<String>,
    /// Bearer token [default: a token from the running `ember dev`]
    #[arg(
        long,
        env = "EMBER_TOKEN",
        global = true,
        hide_env_values = true,
        help_heading = "Global options"
    )]
    pub token: Option<String>,
    /// Which `ember dev` identity to use when no token is given
    #[arg(
        long = "as",
        value_enum,
        global = true,
        help_heading = "Global options"
    )]
    pub identity: Option<DevIdentity>,
    /// The data directory: where `ember dev` keeps its databases, secrets and
    /// the dev-credentials.json client commands read [default: ./ember-data]
    #[arg(
        long,
        env = "EMBER_DATA_DIR",
        global = true,
        help_heading = "Global options"
    )]
    pub data_dir: Option<PathBuf>,
    /// Run this operation through a maintenance lock, for REASON (admins;
    /// audited): sent as `x-ember-break-glass` [default identity under
    /// `ember dev`: the admin]
    #[arg(
        long,
        value_name = "REASON",
        global = true,
        help_heading = "Global options"
    )]
    pub break_glass: Option<String>,
}

impl ConnectArgs {
    /// Where `ember dev` keeps its files, as client commands look for them.
    pub fn dev_data_dir(&self) -> PathBuf {
        self.data_dir
            .clone()
            .unwrap_or_else(|| PathBuf::from(DEFAULT_DATA_DIR))
    }
}

const DEFAULT_DATA_DIR: &str = "./ember-data";

/// An authenticated connection to the gateway.
#[derive(Clone)]
pub struct Client {
    pub channel: Channel,
    token: String,
    break_glass: Option<String>,
}

impl Client {
    pub async fn connect(
        args: &ConnectArgs,
        default_identity: DevIdentity,
    ) -> Result<Client, CliError> {
        let data_dir = args.dev_data_dir();
        let dev = DevCredentials::read(&data_dir).ok();
        let (url, url_from) = match (&args.url, &dev) {
            (Some(url), _) => (url.clone(), "--url or EMBER_URL".to_owned()),
            (None, Some(dev)) => (
                dev.gateway_url.clone(),
                format!(
                    "the running `ember dev`'s {}",
                    data_dir.join(crate::dev::DEV_CREDENTIALS_FILE).display()
                ),
            ),
            (None, None) => ("http://127.0.0.1:8004".to_owned(), "the default".to_owned()),
        };
        let token = match (&args.token, &dev) {
            (Some(token), _) => token.clone(),
            // Only an admin breaks glass.
            (None, Some(dev)) => match args.identity.unwrap_or(if args.break_glass.is_some() {
                DevIdentity::Admin
            } else {
                default_identity
            }) {
                DevIdentity::Admin => dev.admin.token.clone(),
                DevIdentity::Member => dev.member.token.clone(),
            },
            (None, None) => {
                return Err(CliError::Unauthenticated(format!(
                    "no token: there is no {} to take one from (the file a running `ember dev` writes in its data directory; \
                     pass --data-dir DIR if it runs with another one); for another deployment pass --token or set EMBER_TOKEN \
                     (`ember token issue` mints one with the deployment's signing key)",
                    data_dir.join(crate::dev::DEV_CREDENTIALS_FILE).display()
                )));
            }
        };
        GATEWAY_URL.get_or_init(|| url.clone());
        let channel = Endpoint::from_shared(url.clone())
            .map_err(|error| CliError::Usage(format!("--url {url:?}: {error}")))?
            .connect()
            .await
            .map_err(|error| {
                CliError::Unavailable(format!(
                    "cannot reach the gateway at {url} (from {url_from}): {}: expected Ember's gateway there \
                     (the address `ember dev` prints as `gateway`; is it running?)",
                    error_chain(&error)
                ))
            })?;
        Ok(Client {
            channel,
            token,
            break_glass: args.break_glass.clone(),
        })
    }

    /// A request carrying the bearer token.
    pub fn request<T>(&self, message: T) -> Result<tonic::Request<T>, CliError> {
        let mut request = tonic::Request::new(message);
        let value = format!("Bearer {}", self.token).parse().map_err(|_| {
            CliError::Usage("the token contains characters that cannot be sent".to_owned())
        })?;
        request.metadata_mut().insert("authorization", value);
        if let Some(reason) = &self.break_glass {
            let value = reason.parse().map_err(|_| {
                CliError::Usage("--break-glass: the reason must be printable ASCII".to_owned())
            })?;
            request
                .metadata_mut()
                .insert(ember_runtime::call_context::BREAK_GLASS_HEADER, value);
        }
        Ok(request)
    }
}

/// An error and its causes: `transport error: tcp connect error: Connection
/// refused (os error 111)`.
fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        // Layers often repeat their cause's words.
        if !text.ends_with(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    text
}

/// The gateway this process talks to, for errors that are about it rather
/// than about the request (a `ember` command connects to one gateway).
static GATEWAY_URL: std::sync::OnceLock<String> = std::sync::OnceLock::new();

/// Turns a gRPC failure into the message a person reads. A failure that no
/// server sent (the answer was not gRPC at all) or a service the server
/// does not have means the URL does not lead to Ember's gateway: say so.
/// Only [`CliError`]'s `From` calls it: commands convert a status with
/// `?`, which keeps this text and adds the exit code (a command mapping a
/// status to this text alone would exit 1 whatever the failure).
pub(crate) fn describe(status: tonic::Status) -> String {
    let gateway = GATEWAY_URL.get().map_or("the gateway URL", String::as_str);
    let expected = "expected Ember's gateway (gRPC and REST on one port: the address `ember dev` prints as `gateway`)";
    if let Some(transport) = std::error::Error::source(&status) {
        return format!(
            "the server at {gateway} did not answer in gRPC ({}: {}): {expected}; if it is one, it stopped while answering",
            status.message(),
            error_chain(transport)
        );
    }
    if status.code() == tonic::Code::Unimplemented {
        return format!(
            "the server at {gateway} does not serve this Ember API (unimplemented{}{}): {expected}, of this version",
            if status.message().is_empty() {
                ""
            } else {
                ": "
            },
            status.message()
        );
    }
    format!("{}: {}", code_name(status.code()), status.message())
}

fn code_name(code: tonic::Code) -> &'static str {
    match ember_runtime::ErrorKind::from_grpc_code(code) {
        ember_runtime::ErrorKind::InvalidInput => "invalid input",
        ember_runtime::ErrorKind::Unauthenticated => "not authenticated",
        ember_runtime::ErrorKind::Forbidden => "forbidden",
        ember_runtime::ErrorKind::NotFound => "not found",
        ember_runtime::ErrorKind::Conflict => "conflict",
        ember_runtime::ErrorKind::Unavailable => "unavailable",
        ember_runtime::ErrorKind::Timeout => "timed out",
        ember_runtime::ErrorKind::Internal => "internal error",
    }
}

/// Prints rows as aligned columns under a header.
pub fn print_table(header: &[&str], rows: &[Vec<String>]) {
    let mut widths: Vec<usize> = header.iter().map(|title| title.len()).collect();
    for row in rows {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.chars().count());
        }
    }
    let line = |cells: Vec<String>| {
        let padded: Vec<String> = cells
            .iter()
            .zip(&widths)
            .map(|(cell, width)| format!("{cell:<width$}"))
            .collect();
        println!("{}", padded.join("  ").trim_end());
    };
    line(header.iter().map(|title| (*title).to_owned()).collect());
    for row in rows {
        line(row.clone());
    }
}
