//! `metav1.Status` errors with kube-apiserver's codes, reasons and message
//! texts.

use serde_json::{Value, json};

#[derive(Debug, Clone)]
pub struct ApiError {
    pub code: u16,
    pub reason: &'static str,
    pub message: String,
    pub details: Option<(String, String)>,
}

impl ApiError {
    pub fn not_found(qualified: &str, name: &str) -> Self {
        ApiError {
            code: 404,
            reason: "NotFound",
            message: format!("{qualified} \"{name}\" not found"),
            details: Some((name.into(), kind_of(qualified))),
        }
    }

    pub fn already_exists(qualified: &str, name: &str) -> Self {
        ApiError {
            code: 409,
            reason: "AlreadyExists",
            message: format!("{qualified} \"{name}\" already exists"),
            details: Some((name.into(), kind_of(qualified))),
        }
    }

    /// An optimistic-concurrency or precondition failure.
    pub fn conflict(qualified: &str, name: &str, why: &str) -> Self {
        ApiError {
            code: 409,
            reason: "Conflict",
            message: format!("Operation cannot be fulfilled on {qualified} \"{name}\": {why}"),
            details: Some((name.into(), kind_of(qualified))),
        }
    }

    pub fn bad_request(message: impl Into<String>) -> Self {
        ApiError { code: 400, reason: "BadRequest", message: message.into(), details: None }
    }

    pub fn gone(message: impl Into<String>) -> Self {
        ApiError { code: 410, reason: "Expired", message: message.into(), details: None }
    }

    pub fn unsupported_media(message: impl Into<String>) -> Self {
        ApiError { code: 415, reason: "UnsupportedMediaType", message: message.into(), details: None }
    }

    pub fn internal(message: impl Into<String>) -> Self {
        ApiError { code: 500, reason: "InternalError", message: message.into(), details: None }
    }

    pub fn to_status(&self) -> Value {
        let mut s = json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        });
        if let Some((name, kind)) = &self.details {
            s["details"] = json!({"name": name, "kind": kind});
        }
        s
    }
}

/// `pods` from `pods`, `leases` from `leases.coordination.k8s.io`.
fn kind_of(qualified: &str) -> String {
    qualified.split('.').next().unwrap_or(qualified).to_string()
}

pub fn success(code: u16) -> Value {
    json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": code})
}
