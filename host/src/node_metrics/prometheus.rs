//! One Prometheus instant query (`GET /api/v1/query`) per metric and
//! refresh: the expression returns one series per node, named by a label.
//! What the answer can get wrong is reported precisely: an error status
//! with Prometheus's own message, a result that is not an instant vector,
//! series without the node label, two series for one node, values that
//! are not numbers.

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde::Deserialize;

/// What one refresh produced.
#[derive(Debug, Default)]
pub struct Fetched {
    /// Node → value, observed at.
    pub values: Vec<(String, f64, Instant)>,
    /// Series that were skipped, and why.
    pub warnings: Vec<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Response {
    status: String,
    data: Option<Data>,
    error_type: Option<String>,
    error: Option<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Data {
    result_type: String,
    result: serde_json::Value,
}

/// The moment an answer is read, on both clocks: sample times are wall
/// clock, ages count on the monotonic one.
#[derive(Debug, Clone, Copy)]
pub struct Now {
    pub instant: Instant,
    pub wall: SystemTime,
}

impl Now {
    pub fn read() -> Now {
        Now { instant: Instant::now(), wall: SystemTime::now() }
    }
}

/// Converts a wall-clock sample time to the monotonic clock, so ages keep
/// counting correctly (a time in the future counts as now).
pub fn instant_of(time: SystemTime, now: Now) -> Instant {
    let now_wall = now.wall;
    let now = now.instant;
    match now_wall.duration_since(time) {
        Ok(ago) => now.checked_sub(ago).unwrap_or(now),
        Err(_) => now,
    }
}

/// Parses the body of `/api/v1/query`.
pub fn parse_response(body: &[u8], node_label: &str, now: Now) -> Result<Fetched, String> {
    let response: Response = serde_json::from_slice(body).map_err(|e| format!("not a Prometheus API response: {e}"))?;
    if response.status != "success" {
        return Err(format!(
            "query failed: {}: {}",
            response.error_type.unwrap_or_else(|| "error".into()),
            response.error.unwrap_or_default()
        ));
    }
    let data = response.data.ok_or("a success without data")?;
    if data.result_type != "vector" {
        return Err(format!(
            "the query returns a {}; it must return an instant vector with one series per node (e.g. `avg by ({node_label}) (...)`)",
            data.result_type
        ));
    }
    let series = data.result.as_array().ok_or("result is not a list")?;
    let mut fetched = Fetched::default();
    let mut seen = std::collections::HashSet::new();
    for s in series {
        let labels = &s["metric"];
        let Some(node) = labels[node_label].as_str() else {
            fetched.warnings.push(format!("series {labels} has no {node_label:?} label; ignored"));
            continue;
        };
        let (Some(ts), Some(text)) = (s["value"][0].as_f64(), s["value"][1].as_str()) else {
            fetched.warnings.push(format!("series for node {node}: malformed value {}; ignored", s["value"]));
            continue;
        };
        let Some(value) = text.parse::<f64>().ok().filter(|v| v.is_finite()) else {
            fetched.warnings.push(format!("series for node {node}: value {text:?} is not a finite number; ignored"));
            continue;
        };
        if !seen.insert(node.to_string()) {
            fetched.warnings.push(format!(
                "several series for node {node}; aggregate them by {node_label:?} in the query; the first is used"
            ));
            continue;
        }
        // A server's timestamp is input: one past what a clock can hold is
        // skipped, not a panic.
        let Some(at) = Duration::try_from_secs_f64(ts.max(0.0)).ok().and_then(|d| UNIX_EPOCH.checked_add(d)) else {
            fetched.warnings.push(format!("node {node}: timestamp {ts} is not a time; the sample is skipped"));
            continue;
        };
        fetched.values.push((node.to_string(), value, instant_of(at, now)));
    }
    Ok(fetched)
}

/// Runs `query` against the Prometheus at `url`.
pub async fn query(http: &reqwest::Client, url: &str, query: &str, node_label: &str) -> Result<Fetched, String> {
    let response = http
        .get(format!("{url}/api/v1/query"))
        .query(&[("query", query)])
        .send()
        .await
        .map_err(|e| format!("GET {url}/api/v1/query: {e}"))?;
    let status = response.status();
    let body = response.bytes().await.map_err(|e| format!("reading the answer of {url}: {e}"))?;
    // Prometheus answers 400/422/503 with a JSON error body worth showing.
    match parse_response(&body, node_label, Now::read()) {
        Ok(fetched) if status.is_success() => Ok(fetched),
        Ok(_) => Err(format!("{url} answered {status}")),
        Err(e) if status.is_success() => Err(e),
        Err(e) => Err(format!("{url} answered {status}: {e}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn body(result_type: &str, result: &str) -> Vec<u8> {
        format!(r#"{{"status":"success","data":{{"resultType":"{result_type}","result":{result}}}}}"#).into_bytes()
    }

    #[test]
    fn one_series_per_node() {
        let now = Now::read();
        let secs = now.wall.duration_since(UNIX_EPOCH).unwrap().as_secs_f64() - 3.0;
        let b = body(
            "vector",
            &format!(
                r#"[{{"metric":{{"node":"a"}},"value":[{secs},"0.25"]}},
                   {{"metric":{{"instance":"x"}},"value":[{secs},"1"]}},
                   {{"metric":{{"node":"b"}},"value":[{secs},"NaN"]}},
                   {{"metric":{{"node":"c"}},"value":[{secs},"fast"]}},
                   {{"metric":{{"node":"a"}},"value":[{secs},"9"]}}]"#
            ),
        );
        let f = parse_response(&b, "node", now).unwrap();
        assert_eq!(f.values.len(), 1);
        assert_eq!((f.values[0].0.as_str(), f.values[0].1), ("a", 0.25));
        // Both clocks are the test's: the age is the 3 s it wrote, to the
        // precision of a float of seconds since 1970.
        let age = now.instant.duration_since(f.values[0].2);
        assert!(age.abs_diff(Duration::from_secs(3)) < Duration::from_millis(1), "{age:?}");
        assert_eq!(f.warnings.len(), 4, "{:?}", f.warnings);
        assert!(f.warnings[0].contains("has no \"node\" label"));
        assert!(f.warnings[1].contains("\"NaN\" is not a finite number"));
        assert!(f.warnings[3].contains("several series for node a"));
    }

    #[test]
    fn errors_say_what_is_wrong() {
        let e = parse_response(&body("matrix", "[]"), "node", Now::read()).err().unwrap();
        assert!(e.contains("returns a matrix; it must return an instant vector"), "{e}");
        let e = parse_response(b"<html>", "node", Now::read()).err().unwrap();
        assert!(e.contains("not a Prometheus API response"), "{e}");
        let e = parse_response(
            br#"{"status":"error","errorType":"bad_data","error":"parse error at char 5"}"#,
            "node",
            Now::read(),
        )
        .err()
        .unwrap();
        assert_eq!(e, "query failed: bad_data: parse error at char 5");
    }
}
