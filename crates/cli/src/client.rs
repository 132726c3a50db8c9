//! The operator's side of the CLI: a gRPC connection to the gateway with a
//! token, found from flags, the environment or a running `ember dev`.

use std::path::PathBuf;

use tonic::transport::{Channel, Endpoint};

use crate::dev::DevCredentials;

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
}

impl Client {
    pub async fn connect(
        args: &ConnectArgs,
        default_identity: DevIdentity,
    ) -> Result<Client, String> {
        let data_dir = args.dev_data_dir();
        let dev = DevCredentials::read(&data_dir).ok();
        let url = args
            .url
            .clone()
            .or_else(|| dev.as_ref().map(|dev| dev.gateway_url.clone()))
            .unwrap_or_else(|| "http://127.0.0.1:8004".to_owned());
        let token = match (&args.token, &dev) {
            (Some(token), _) => token.clone(),
            (None, Some(dev)) => match args.identity.unwrap_or(default_identity) {
                DevIdentity::Admin => dev.admin.token.clone(),
                DevIdentity::Member => dev.member.token.clone(),
            },
            (None, None) => {
                return Err(format!(
                    "no token: pass --token or set EMBER_TOKEN (or run `ember dev` with --data-dir {})",
                    data_dir.display()
                ));
            }
        };
        let channel = Endpoint::from_shared(url.clone())
            .map_err(|error| format!("--url {url:?}: {error}"))?
            .connect()
            .await
            .map_err(|error| format!("cannot reach the gateway at {url}: {error}"))?;
        Ok(Client { channel, token })
    }

    /// A request carrying the bearer token.
    pub fn request<T>(&self, message: T) -> Result<tonic::Request<T>, String> {
        let mut request = tonic::Request::new(message);
        let value = format!("Bearer {}", self.token)
            .parse()
            .map_err(|_| "the token contains characters that cannot be sent".to_owned())?;
        request.metadata_mut().insert("authorization", value);
        Ok(request)
    }
}

/// Turns a gRPC failure into the message a person reads.
pub fn describe(status: tonic::Status) -> String {
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
