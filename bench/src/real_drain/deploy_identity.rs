//! wasmsched as deploy/ runs it: deploy/'s namespace, RBAC and FlowSchema
//! applied with kubectl, as an operator's install applies them, and a
//! kubeconfig for its ServiceAccount with a token from `kubectl create
//! token`. A soak run as system:kube-scheduler would not show what a
//! missing rule or the FlowSchema's priority level does under load.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use anyhow::{Context, bail};

/// Applies deploy/'s identity and writes its kubeconfig into `state_dir`;
/// the token lasts `lifetime`.
pub fn kubeconfig(state_dir: &Path, lifetime: Duration) -> anyhow::Result<PathBuf> {
    let admin = state_dir.join("admin.kubeconfig");
    let deploy = Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy");
    let mut apply = Command::new("kubectl");
    apply.arg("--kubeconfig").arg(&admin).arg("apply");
    for file in ["namespace.yaml", "rbac.yaml", "flowschema.yaml"] {
        apply.arg("-f").arg(deploy.join(file));
    }
    run(&mut apply, "kubectl apply of deploy/'s namespace, RBAC and FlowSchema")?;
    let mut create = Command::new("kubectl");
    create.arg("--kubeconfig").arg(&admin).args(["-n", "wasmsched", "create", "token", "wasmsched"]);
    let token = run(create.arg(format!("--duration={}s", lifetime.as_secs().max(600))), "kubectl create token")?;
    let mut config = kube::config::Kubeconfig::read_from(&admin).context("reading admin.kubeconfig")?;
    for user in &mut config.auth_infos {
        user.auth_info =
            Some(kube::config::AuthInfo { token: Some(token.trim().to_string().into()), ..Default::default() });
    }
    for context in &mut config.contexts {
        if let Some(c) = context.context.as_mut() {
            c.namespace = Some("wasmsched".into());
        }
    }
    let path = state_dir.join("deploy-wasmsched.kubeconfig");
    // JSON is YAML: kubectl and kube-rs read it as a kubeconfig.
    std::fs::write(&path, serde_json::to_string_pretty(&config)?).with_context(|| format!("{}", path.display()))?;
    Ok(path)
}

fn run(command: &mut Command, what: &str) -> anyhow::Result<String> {
    let out = command.output().with_context(|| format!("running {what}"))?;
    if !out.status.success() {
        bail!("{what} failed: {}", String::from_utf8_lossy(&out.stderr).trim());
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}
