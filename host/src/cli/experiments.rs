//! `wasmsched experiments`: what a running scheduler's shadow candidates
//! would have done, read from its `/experiments` endpoint and printed as
//! `simulate` prints them (or as JSON or YAML), kubectl-style. It sends
//! the caller's bearer token, which the scheduler has the API server
//! review: RBAC decides whether it sees every candidate or one tenant's.

use std::process::ExitCode;

use std::path::{Path, PathBuf};

use anyhow::Context;
use clap::{Args, ValueEnum};
use kube::config::Kubeconfig;
use secrecy::ExposeSecret;
use wasmsched::scheduler::experiments::CandidateCounts;
use wasmsched::sim::report;

#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum Output {
    Table,
    Json,
    Yaml,
}

#[derive(Args, Debug)]
pub struct ExperimentsArgs {
    /// The scheduler's endpoints (`--http-addr`), e.g. through
    /// `kubectl -n wasmsched port-forward deploy/wasmsched 10251`.
    #[arg(long, value_name = "URL", default_value = "http://localhost:10251")]
    pub server: String,
    /// Only this profile's candidates.
    #[arg(long, value_name = "SCHEDULER_NAME")]
    pub profile: Option<String>,
    /// Only this tenant's candidates (those of its policy ConfigMaps),
    /// which is all a tenant may see.
    #[arg(short, long, value_name = "NAMESPACE")]
    pub namespace: Option<String>,
    /// The bearer token the scheduler reviews with the API server
    /// [default: the kubeconfig user's token, else the pod's ServiceAccount
    /// token].
    #[arg(long, value_name = "TOKEN", env = "WASMSCHED_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
    /// Path to the kubeconfig whose user's token is sent.
    #[arg(long, value_name = "FILE")]
    pub kubeconfig: Option<PathBuf>,
    /// The kubeconfig context whose user's token is sent.
    #[arg(long, value_name = "NAME")]
    pub context: Option<String>,
    #[arg(short, long, value_enum, default_value = "table")]
    pub output: Output,
}

pub fn run(args: ExperimentsArgs) -> anyhow::Result<ExitCode> {
    let mut url = format!("{}/experiments", args.server.trim_end_matches('/'));
    if let Some(ns) = &args.namespace {
        url += &format!("?namespace={ns}");
    }
    let token = match &args.token {
        Some(token) => Some(token.clone()),
        None => bearer_token(args.kubeconfig.as_deref(), args.context.as_deref())?,
    };
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    let body = runtime.block_on(get(&url, token.as_deref()))?;
    let mut candidates: Vec<CandidateCounts> =
        serde_json::from_str(&body).with_context(|| format!("GET {url}: not a list of candidates"))?;
    if let Some(profile) = &args.profile {
        candidates.retain(|c| &c.profile == profile);
    }
    match args.output {
        Output::Table if candidates.is_empty() => println!("No shadow candidates."),
        Output::Table => print!("{}", report::experiments(&candidates).trim_start()),
        Output::Json => println!("{}", serde_json::to_string_pretty(&candidates)?),
        Output::Yaml => print!("{}", serde_yaml::to_string(&candidates)?),
    }
    Ok(ExitCode::SUCCESS)
}

/// Behind a Service, a connection may reach the standby replica, which
/// says so: a few fresh connections find the leader.
const STANDBY_TRIES: usize = 6;

async fn get(url: &str, token: Option<&str>) -> anyhow::Result<String> {
    let mut tries = 0;
    loop {
        // A client of its own: a new connection each try.
        let mut request = reqwest::Client::new().get(url);
        if let Some(token) = token {
            request = request.bearer_auth(token);
        }
        let response =
            request.send().await.with_context(|| format!("GET {url}: is the scheduler's --http-addr reachable?"))?;
        let status = response.status();
        let text = response.text().await.with_context(|| format!("GET {url}"))?;
        tries += 1;
        if status.is_success() {
            return Ok(text);
        }
        let standby = status.as_u16() == 503 && text.contains("on standby");
        anyhow::ensure!(standby && tries < STANDBY_TRIES, "GET {url}: {status}: {}", text.trim());
    }
}

/// Where a pod's ServiceAccount token is mounted.
const POD_TOKEN: &str = "/var/run/secrets/kubernetes.io/serviceaccount/token";

/// The kubeconfig user's bearer token (`token` or `tokenFile`), or inside
/// a pod its ServiceAccount's; `None` when there is neither (the scheduler
/// then says what it needs).
fn bearer_token(kubeconfig: Option<&Path>, context: Option<&str>) -> anyhow::Result<Option<String>> {
    let config = match kubeconfig {
        Some(path) => Some(Kubeconfig::read_from(path).with_context(|| format!("reading {}", path.display()))?),
        None => Kubeconfig::read().ok(),
    };
    let Some(config) = config else {
        return Ok(std::fs::read_to_string(POD_TOKEN).ok().map(|t| t.trim().to_string()));
    };
    let wanted = context.map(str::to_string).or(config.current_context.clone());
    let named = config.contexts.iter().find(|c| Some(&c.name) == wanted.as_ref());
    let Some(user) = named.and_then(|c| c.context.as_ref()?.user.clone()) else {
        anyhow::bail!(
            "the kubeconfig has no context {:?} with a user; pass --context or --token",
            wanted.unwrap_or_default()
        );
    };
    let auth = config.auth_infos.iter().find(|a| a.name == user).and_then(|a| a.auth_info.clone());
    let Some(auth) = auth else { anyhow::bail!("the kubeconfig has no user {user:?}; pass --token") };
    if let Some(token) = &auth.token {
        return Ok(Some(token.expose_secret().to_string()));
    }
    if let Some(file) = &auth.token_file {
        let token =
            std::fs::read_to_string(file).with_context(|| format!("reading the kubeconfig's tokenFile {file}"))?;
        return Ok(Some(token.trim().to_string()));
    }
    anyhow::bail!(
        "the kubeconfig's user {user:?} has no bearer token (a client certificate or an exec plugin is not one the \
         scheduler can review); pass --token, e.g. --token \"$(kubectl create token NAME -n NAMESPACE)\""
    )
}
