//! `wasmsched push POLICY.wasm oci://REGISTRY/REPOSITORY:TAG`: checks that
//! the file loads as a policy, pushes it in the wasm artifact layout
//! (config `application/vnd.wasm.config.v0+json`, one `application/wasm`
//! layer, as Kubewarden, Spin and `wkg` push), and prints the reference
//! pinned by digest, ready to paste into a bundle or a configuration file.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::Args;
use wasmsched_runtime::PolicySource;

use wasmsched::policy::flags::LimitArgs;
use wasmsched::policy::oci::{self, OciRef};

#[derive(Args, Debug)]
pub struct PushArgs {
    /// The policy component (.wasm).
    pub policy: PathBuf,
    /// Where to push it: `oci://REGISTRY/REPOSITORY:TAG`.
    pub reference: String,
    #[command(flatten)]
    pub limits: LimitArgs,
}

pub fn run(args: PushArgs) -> anyhow::Result<ExitCode> {
    let reference = OciRef::parse(&args.reference).map_err(anyhow::Error::msg)?;
    let source = PolicySource::from_file(&args.policy).with_context(|| format!("reading {}", args.policy.display()))?;
    // A file that is not a policy is not pushed: what a registry holds is
    // loaded unattended later.
    let engine = super::compile_worker::engine(&args.limits)?;
    if let Err(e) = engine.load(&source, "{}", args.limits.to_limits()?) {
        println!("FAIL  {e}");
        println!("      not pushed: `wasmsched check {}` says more", args.policy.display());
        return Ok(ExitCode::FAILURE);
    }
    let digest =
        oci::push(&reference, source.bytes.to_vec(), &args.limits.registries()?).map_err(anyhow::Error::msg)?;
    println!("pushed      {}@{digest}", args.reference);
    println!(
        "use it as   url: {}@{digest}   (a bundle's NAME.yaml, a configuration file, --policy)",
        reference.repository()
    );
    Ok(ExitCode::SUCCESS)
}
