//! `wasmsched auth check`: what `wasmsched run` with the same flags would
//! need of the API server, asked of it as the preflight of `run` asks (in
//! the spirit of `kubectl auth can-i --list`), and how to grant what is
//! missing.

use std::process::ExitCode;

use clap::{Args, Subcommand};
use wasmsched::kubernetes::permissions::{self, Verdict, advice, review};

use super::run::{RunArgs, resolved};

#[derive(Args, Debug)]
pub struct AuthArgs {
    #[command(subcommand)]
    pub command: AuthCommand,
}

#[derive(Subcommand, Debug)]
pub enum AuthCommand {
    /// Print every permission `wasmsched run` with these flags uses,
    /// whether this identity has it, and how to grant what is missing
    /// (exit status 1 if anything is).
    Check(Box<CheckArgs>),
}

#[derive(Args, Debug)]
pub struct CheckArgs {
    /// Review the permissions of this user instead, by impersonation (as
    /// kubectl's `--as`): `system:serviceaccount:wasmsched:wasmsched` is
    /// deploy/'s identity. Needs the `impersonate` permission.
    #[arg(long = "as", value_name = "USER")]
    pub as_user: Option<String>,
    /// The flags of the `wasmsched run` to check for.
    #[command(flatten)]
    pub run: RunArgs,
}

pub fn run(args: AuthArgs) -> anyhow::Result<ExitCode> {
    let AuthCommand::Check(check) = args.command;
    let CheckArgs { as_user, run: args } = *check;
    let config = resolved(&args)?;
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    runtime.block_on(async move {
        let (kubeconfig, context) = (args.kubeconfig.as_deref(), args.context.as_deref());
        let client = wasmsched::kubernetes::client::connect_as(kubeconfig, context, as_user.as_deref()).await?;
        let needs = permissions::needs(&config, client.default_namespace());
        let identity = review::whoami(&client).await;
        let reviewed = review::review(&client, needs).await;
        let subject = identity.as_deref().unwrap_or("system:serviceaccount:wasmsched:wasmsched");
        println!("identity: {}", identity.as_deref().unwrap_or("(the API server did not say)"));
        print!("{}", advice::table(&reviewed));
        let missing: Vec<_> = reviewed.iter().filter(|r| matches!(r.verdict, Verdict::Missing(_))).collect();
        let unknown = reviewed.iter().filter(|r| matches!(r.verdict, Verdict::Unknown(_))).count();
        if missing.is_empty() && unknown == 0 {
            println!("\nall {} permissions granted", reviewed.len());
            return Ok(ExitCode::SUCCESS);
        }
        if !missing.is_empty() {
            println!(
                "\n{} of {} permissions missing. deploy/rbac.yaml grants all of them to its ServiceAccount \
                 (wasmsched/wasmsched); for this identity, one by one:",
                missing.len(),
                reviewed.len()
            );
        }
        for r in &missing {
            let p = &r.need.permission;
            println!("- {p}: {}\n  {}", advice::consequence(r.need.gate), advice::grant(p, subject));
        }
        if unknown > 0 {
            println!("\n{unknown} permissions could not be reviewed (see GRANTED)");
        }
        Ok(ExitCode::FAILURE)
    })
}
