//! `wasmsched experiments`: what a running scheduler's shadow candidates
//! would have done, read from its `/experiments` endpoint and printed as
//! `simulate` prints them (or as JSON or YAML), kubectl-style.

use std::process::ExitCode;

use anyhow::Context;
use clap::{Args, ValueEnum};
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
    #[arg(short, long, value_enum, default_value = "table")]
    pub output: Output,
}

pub fn run(args: ExperimentsArgs) -> anyhow::Result<ExitCode> {
    let url = format!("{}/experiments", args.server.trim_end_matches('/'));
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    let body = runtime.block_on(async {
        let response = reqwest::get(&url)
            .await
            .with_context(|| format!("GET {url}: is the scheduler's --http-addr reachable?"))?;
        anyhow::ensure!(response.status().is_success(), "GET {url}: {}", response.status());
        response.text().await.with_context(|| format!("GET {url}"))
    })?;
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
