//! Asks the API server what this identity may do: one
//! SelfSubjectAccessReview per permission (what `kubectl auth can-i`
//! sends), and a SelfSubjectReview for who it is (`kubectl auth whoami`).
//! Every authenticated user may send both.

use std::time::Duration;

use k8s_openapi::api::authentication::v1::SelfSubjectReview;
use k8s_openapi::api::authorization::v1::{ResourceAttributes, SelfSubjectAccessReview, SelfSubjectAccessReviewSpec};
use kube::Api;
use kube::api::PostParams;

use super::needs::{Need, Permission};
use crate::kubernetes::writes::denied;

/// How long one round of reviews may take.
const ROUND_TIMEOUT: Duration = Duration::from_secs(20);

#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case", tag = "verdict", content = "detail")]
pub enum Verdict {
    Granted,
    /// Refused, with the authorizer's reason when it gave one.
    Missing(String),
    /// The review itself failed: nothing is assumed either way.
    Unknown(String),
}

#[derive(Debug, Clone, serde::Serialize)]
pub struct Reviewed {
    #[serde(flatten)]
    pub need: Need,
    #[serde(flatten)]
    pub verdict: Verdict,
}

/// Who the client is (`system:serviceaccount:NS:NAME`, a user name), if the
/// API server says.
pub async fn whoami(client: &kube::Client) -> Option<String> {
    let api: Api<SelfSubjectReview> = Api::all(client.clone());
    let review = SelfSubjectReview::default();
    let answer = tokio::time::timeout(ROUND_TIMEOUT, api.create(&PostParams::default(), &review)).await.ok()?.ok()?;
    answer.status?.user_info?.username
}

/// Every need, reviewed at once.
pub async fn review(client: &kube::Client, needs: Vec<Need>) -> Vec<Reviewed> {
    let asks = needs.iter().map(|need| ask(client, &need.permission));
    let verdicts = match tokio::time::timeout(ROUND_TIMEOUT, futures::future::join_all(asks)).await {
        Ok(verdicts) => verdicts,
        Err(_) => vec![Verdict::Unknown(format!("no answer within {ROUND_TIMEOUT:?}")); needs.len()],
    };
    needs.into_iter().zip(verdicts).map(|(need, verdict)| Reviewed { need, verdict }).collect()
}

async fn ask(client: &kube::Client, p: &Permission) -> Verdict {
    let api: Api<SelfSubjectAccessReview> = Api::all(client.clone());
    let attributes = ResourceAttributes {
        verb: Some(p.verb.to_string()),
        group: Some(p.group.to_string()),
        resource: Some(p.resource.to_string()),
        subresource: (!p.subresource.is_empty()).then(|| p.subresource.to_string()),
        namespace: p.namespace.clone(),
        name: p.name.clone(),
        ..ResourceAttributes::default()
    };
    let review = SelfSubjectAccessReview {
        spec: SelfSubjectAccessReviewSpec { resource_attributes: Some(attributes), ..Default::default() },
        ..Default::default()
    };
    match api.create(&PostParams::default(), &review).await {
        Ok(answer) => match answer.status {
            Some(s) if s.allowed => Verdict::Granted,
            Some(s) => Verdict::Missing(s.reason.or(s.evaluation_error).unwrap_or_default()),
            None => Verdict::Unknown("the API server answered without a status".into()),
        },
        Err(e) => Verdict::Unknown(denied::message(&e)),
    }
}
