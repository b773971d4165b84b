//! Who may read `/experiments`: it names pods and the nodes they went to,
//! so its callers are authenticated and authorized by the API server, as
//! kube-scheduler's secure port's are. The caller's bearer token is
//! reviewed (TokenReview), then the API server is asked whether that user
//! may `get` `experiments.wasmsched.io` (SubjectAccessReview): cluster-wide
//! for every candidate, or in one namespace for that tenant's own.
//! deploy/rbac.yaml's `wasmsched-experiments-viewer` ClusterRole grants it.

use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec};
use k8s_openapi::api::authorization::v1::{ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec};
use kube::Api;
use kube::api::PostParams;

/// How `/experiments` admits its callers (`--experiments-access`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum ExperimentsAccess {
    /// Each caller's bearer token is reviewed, and RBAC decides what it sees.
    #[default]
    Authorized,
    /// Whoever reaches the port sees every candidate (a port only
    /// operators can reach).
    Open,
}

/// What a caller asked to see.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum View {
    /// Every candidate: the profiles' and every tenant's.
    All,
    /// One tenant's candidates, whose results hold only its pods.
    Namespace(String),
}

impl View {
    /// `?namespace=NS` (a DNS label), else everything.
    pub fn of_query(query: &str) -> Result<View, String> {
        let Some(ns) = query.split('&').find_map(|p| p.strip_prefix("namespace=")) else {
            return Ok(View::All);
        };
        let label = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-';
        if ns.is_empty() || ns.len() > 63 || !ns.chars().all(label) {
            return Err(format!("namespace {ns:?} is not a namespace name"));
        }
        Ok(View::Namespace(ns.to_string()))
    }

    fn namespace(&self) -> Option<&str> {
        match self {
            View::All => None,
            View::Namespace(ns) => Some(ns),
        }
    }

    fn described(&self) -> String {
        match self {
            View::All => "cluster-wide".to_string(),
            View::Namespace(ns) => format!("in namespace {ns}"),
        }
    }
}

/// Why a caller was turned away: the HTTP status and what to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub code: u16,
    pub message: String,
}

/// The verb a caller needs, as `kubectl auth can-i` would ask it.
const CAN_I: &str = "get experiments.wasmsched.io";

/// Admits the caller with `authorization` (the request's header) to
/// `view`, asking the API server `client` talks to.
pub async fn admit(client: &kube::Client, authorization: Option<&str>, view: &View) -> Result<(), Refusal> {
    let refuse = |code, message: String| Err(Refusal { code, message });
    let Some(token) = authorization.and_then(|h| h.strip_prefix("Bearer ")).map(str::trim).filter(|t| !t.is_empty())
    else {
        return refuse(
            401,
            "no bearer token: send one (`wasmsched experiments` sends your kubeconfig's, or --token)".into(),
        );
    };
    let review =
        TokenReview { spec: TokenReviewSpec { token: token.to_string(), ..Default::default() }, ..Default::default() };
    let reviewed = match Api::<TokenReview>::all(client.clone()).create(&PostParams::default(), &review).await {
        Ok(r) => r.status.unwrap_or_default(),
        Err(e) => return refuse(503, unreviewable("tokenreviews.authentication.k8s.io", &e)),
    };
    let Some(user) = reviewed.user.filter(|_| reviewed.authenticated == Some(true)) else {
        let why = reviewed.error.unwrap_or_else(|| "the API server does not know this token".into());
        return refuse(401, format!("the token was not accepted: {why}"));
    };
    let username = user.username.clone().unwrap_or_default();
    let access = SubjectAccessReview {
        spec: SubjectAccessReviewSpec {
            user: user.username,
            groups: user.groups,
            uid: user.uid,
            extra: user.extra,
            resource_attributes: Some(ResourceAttributes {
                group: Some("wasmsched.io".into()),
                resource: Some("experiments".into()),
                verb: Some("get".into()),
                namespace: view.namespace().map(str::to_string),
                ..Default::default()
            }),
            ..Default::default()
        },
        ..Default::default()
    };
    let decided = match Api::<SubjectAccessReview>::all(client.clone()).create(&PostParams::default(), &access).await {
        Ok(r) => r.status.unwrap_or_default(),
        Err(e) => return refuse(503, unreviewable("subjectaccessreviews.authorization.k8s.io", &e)),
    };
    if decided.allowed {
        return Ok(());
    }
    let scope = view.described();
    let how = match view {
        View::All => "a ClusterRoleBinding to the ClusterRole wasmsched-experiments-viewer".to_string(),
        View::Namespace(ns) => {
            format!("a RoleBinding in {ns} to the ClusterRole wasmsched-experiments-viewer (deploy/rbac.yaml)")
        }
    };
    refuse(403, format!("user {username:?} cannot {CAN_I} {scope}; it needs {how}"))
}

/// The scheduler itself may not ask: say which permission it lacks.
fn unreviewable(resource: &str, e: &kube::Error) -> String {
    format!(
        "cannot check who asks: creating {resource} failed ({e}); grant wasmsched's identity `create` on it, \
         as deploy/rbac.yaml does, or run with --experiments-access=open on a port only operators reach"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_view_is_one_namespace_or_everything() {
        assert_eq!(View::of_query(""), Ok(View::All));
        assert_eq!(View::of_query("x=1&namespace=team-a"), Ok(View::Namespace("team-a".into())));
        assert!(View::of_query("namespace=Team_A").unwrap_err().contains("not a namespace name"));
        assert!(View::of_query("namespace=").is_err());
    }
}
