//! A layer under every API client this process builds that counts and
//! times its requests into client-go's families (`REST_CLIENT`), as
//! kube-scheduler's client does: the scheduler dashboards' request rate
//! by code and request latency read them.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Instant;

use http::{Request, Response};
use tower::{Layer, Service};

use crate::scheduler_metrics::REST_CLIENT;

/// Measures each request to `host` (the API server's `host:port`).
#[derive(Debug, Clone)]
pub struct RequestMetricsLayer {
    pub host: String,
}

impl<S> Layer<S> for RequestMetricsLayer {
    type Service = RequestMetrics<S>;

    fn layer(&self, inner: S) -> Self::Service {
        RequestMetrics { inner, host: self.host.clone() }
    }
}

#[derive(Debug, Clone)]
pub struct RequestMetrics<S> {
    inner: S,
    host: String,
}

impl<S, ReqBody, ResBody> Service<Request<ReqBody>> for RequestMetrics<S>
where
    S: Service<Request<ReqBody>, Response = Response<ResBody>>,
    S::Future: Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<S::Response, S::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<ReqBody>) -> Self::Future {
        let (method, host, started) = (request.method().to_string(), self.host.clone(), Instant::now());
        let answer = self.inner.call(request);
        Box::pin(async move {
            let response = answer.await;
            // A watch answers its head at once and streams after: timed to
            // the head, as client-go times every request.
            let code = match &response {
                Ok(r) => r.status().as_u16().to_string(),
                Err(_) => "<error>".to_string(),
            };
            REST_CLIENT.observe(&host, &method, &code, started.elapsed());
            response
        })
    }
}
