//! client-go's request families (`rest_client_*`), for every request this
//! process makes to the API server: the scheduler dashboards' request
//! rate by code and request latency read them. Process-wide, as
//! client-go's are: every client `kubernetes::client` builds reports here.

use std::time::Duration;

use super::family::{Family, Histogram, render_histogram, render_scalar};

/// client-go's buckets for `rest_client_request_duration_seconds`.
const REQUEST_BUCKETS: &[f64] = &[0.005, 0.025, 0.1, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 15.0, 30.0, 60.0];

pub struct RestClientMetrics {
    requests: Family<f64>,
    duration: Family<Histogram>,
}

/// The process's requests.
pub static REST_CLIENT: RestClientMetrics = RestClientMetrics {
    requests: Family::new(
        "rest_client_requests_total",
        "Number of HTTP requests, partitioned by status code, method, and host.",
        &["code", "host", "method"],
    ),
    duration: Family::new(
        "rest_client_request_duration_seconds",
        "Request latency in seconds. Broken down by verb, and host.",
        &["host", "verb"],
    ),
};

impl RestClientMetrics {
    /// One request answered (`code`: the HTTP status, or `<error>` when
    /// none came), timed to its response's head, as client-go times it.
    pub fn observe(&self, host: &str, method: &str, code: &str, took: Duration) {
        self.requests.with(&[code, host, method], |v| *v += 1.0);
        self.duration.with(&[host, method], |h| h.observe(REQUEST_BUCKETS, took.as_secs_f64()));
    }

    pub(super) fn render(&self, out: &mut String) {
        render_scalar(out, &self.requests, "counter");
        render_histogram(out, &self.duration, REQUEST_BUCKETS);
    }
}
