//! Where the API server is: a kubeconfig file (flag, `KUBECONFIG`,
//! `~/.kube/config`) or the pod's in-cluster service account.

use std::path::Path;

use kube::config::{KubeConfigOptions, Kubeconfig};

use super::client_metrics::RequestMetricsLayer;

#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("reading kubeconfig {path}: {source}")]
    Kubeconfig { path: String, source: kube::config::KubeconfigError },
    #[error(
        "no cluster configuration found (tried --kubeconfig, KUBECONFIG, ~/.kube/config and the in-cluster service account): {0}"
    )]
    Infer(kube::config::InferConfigError),
    #[error("building the API client: {0}")]
    Client(kube::Error),
}

/// A client for `kubeconfig` (with an optional context), or inferred the
/// way kubectl does when it is `None`.
pub async fn connect(kubeconfig: Option<&Path>, context: Option<&str>) -> Result<kube::Client, ClientError> {
    connect_as(kubeconfig, context, None).await
}

/// As `connect`, acting as `user` by impersonation when given (kubectl's
/// `--as`).
pub async fn connect_as(
    kubeconfig: Option<&Path>,
    context: Option<&str>,
    user: Option<&str>,
) -> Result<kube::Client, ClientError> {
    let options = KubeConfigOptions { context: context.map(str::to_string), ..Default::default() };
    let config = match kubeconfig {
        Some(path) => {
            let file = Kubeconfig::read_from(path)
                .map_err(|source| ClientError::Kubeconfig { path: path.display().to_string(), source })?;
            kube::Config::from_custom_kubeconfig(file, &options)
                .await
                .map_err(|source| ClientError::Kubeconfig { path: path.display().to_string(), source })?
        }
        None if context.is_some() => kube::Config::from_kubeconfig(&options)
            .await
            .map_err(|source| ClientError::Kubeconfig { path: "(default)".into(), source })?,
        None => kube::Config::infer().await.map_err(ClientError::Infer)?,
    };
    let mut config = config;
    if let Some(user) = user {
        config.auth_info.impersonate = Some(user.to_string());
    }
    let host = config.cluster_url.authority().map(|a| a.to_string()).unwrap_or_default();
    let builder = kube::client::ClientBuilder::try_from(config).map_err(ClientError::Client)?;
    Ok(builder.with_layer(&RequestMetricsLayer { host }).build())
}
