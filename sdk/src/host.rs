//! What the scheduler offers a policy: logging, configuration, node metrics.
//!
//! On wasm these call the host's imports. In native builds (`cargo test`) they
//! are served by the [`crate::testing`] harness of the current thread, so a
//! policy's logic is tested without any wasm involved.

use crate::{LogLevel, MetricSample, NodeId};

/// Logs a structured line, attributed to this policy by the scheduler.
pub fn log(level: LogLevel, message: &str, fields: &[(&str, &str)]) {
    imp::log(level, message, fields)
}

pub fn info(message: &str) {
    log(LogLevel::Info, message, &[])
}

pub fn warn(message: &str) {
    log(LogLevel::Warn, message, &[])
}

/// The policy's configuration as JSON text.
pub fn config_json() -> String {
    imp::config()
}

/// One metric for many nodes in one crossing; `None` where absent.
pub fn node_metrics(metric: &str, nodes: &[NodeId]) -> Vec<Option<MetricSample>> {
    imp::node_metrics(metric, nodes)
}

#[cfg(target_arch = "wasm32")]
mod imp {
    use crate::bindings::wasmsched::policy::host;
    use crate::{LogLevel, MetricSample, NodeId};

    pub fn log(level: LogLevel, message: &str, fields: &[(&str, &str)]) {
        let fields: Vec<(String, String)> = fields.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        host::log(level, message, &fields);
    }

    pub fn config() -> String {
        host::config()
    }

    pub fn node_metrics(metric: &str, nodes: &[NodeId]) -> Vec<Option<MetricSample>> {
        host::node_metrics(metric, nodes)
    }
}

#[cfg(not(target_arch = "wasm32"))]
mod imp {
    use crate::test_host::TEST_HOST;
    use crate::{LogLevel, MetricSample, NodeId};

    pub fn log(level: LogLevel, message: &str, fields: &[(&str, &str)]) {
        TEST_HOST.with(|host| {
            let mut line = format!("{level:?}: {message}");
            for (k, v) in fields {
                line.push_str(&format!(" {k}={v}"));
            }
            host.borrow_mut().logs.push(line);
        });
    }

    pub fn config() -> String {
        TEST_HOST.with(|host| host.borrow().config.clone())
    }

    pub fn node_metrics(metric: &str, nodes: &[NodeId]) -> Vec<Option<MetricSample>> {
        TEST_HOST.with(|host| {
            let host = host.borrow();
            nodes.iter().map(|id| host.metrics.get(&(*id, metric.to_string())).copied()).collect()
        })
    }
}
