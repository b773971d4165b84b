//! The contract's rules on what a policy answers, written once for the
//! scheduler (which refuses an answer that breaks one, as a malformed
//! result) and for the Rust SDK's test harness (which fails the author's
//! test with the same words first). The Python and JavaScript harnesses
//! hold copies, and a test compares their words with these.
//!
//! Each check returns the problem in the words the scheduler reports after
//! `POLICY: malformed PHASE result: `, or `None` when the answer keeps the
//! rules.

/// Raw scores beyond this magnitude lose integer precision in f64.
pub const MAX_RAW_SCORE: f64 = 9_007_199_254_740_992.0; // 2^53

/// The most parts a policy may name for one node's score, and the longest
/// name: a breakdown is read by a person, one line per node.
pub const MAX_SCORE_PARTS: usize = 16;
pub const MAX_PART_NAME_BYTES: usize = 64;

/// The most a policy's strings may hold: its name (a DNS subdomain's
/// length), version and description; each filter reason; the message of
/// an error it returns. Longer ones are refused, so that no record, event
/// or log keeps what a policy made huge.
pub const MAX_NAME_BYTES: usize = 253;
pub const MAX_VERSION_BYTES: usize = 64;
pub const MAX_DESCRIPTION_BYTES: usize = 1024;
pub const MAX_REASON_BYTES: usize = 1024;
pub const MAX_ERROR_BYTES: usize = 4096;

/// `what` within `max` bytes, or the problem to report.
pub fn within(what: &str, text: &str, max: usize) -> Option<String> {
    (text.len() > max).then(|| format!("{what} is {} bytes, over the {max}-byte limit", text.len()))
}

/// A filter's answer for `candidates` nodes: one verdict each (0 passes,
/// N names reason N), at most one reason per candidate, each within
/// [`MAX_REASON_BYTES`].
pub fn filter_problem(reasons: &[String], verdicts: &[u32], candidates: usize) -> Option<String> {
    if verdicts.len() != candidates {
        return Some(format!("{} verdicts for {candidates} candidates", verdicts.len()));
    }
    // One reason per candidate at most is all a verdict can name.
    if reasons.len() > candidates.max(1) {
        return Some(format!("{} reasons for {candidates} candidates", reasons.len()));
    }
    // Measured first: the words are made only for a reason too long.
    if let Some((i, reason)) = reasons.iter().enumerate().find(|(_, r)| r.len() > MAX_REASON_BYTES) {
        return within(&format!("reason {i}"), reason, MAX_REASON_BYTES);
    }
    let (i, verdict) = verdicts.iter().enumerate().find(|(_, v)| **v as usize > reasons.len())?;
    Some(format!("verdict {verdict} of candidate {i} names a reason beyond the {} given", reasons.len()))
}

/// A score's answer: one finite score per candidate, magnitude at most
/// 2^53. `node` names candidate `i`, as the author finds it in the cluster.
pub fn score_problem<'a>(scores: &[f64], candidates: usize, node: impl Fn(usize) -> &'a str) -> Option<String> {
    if scores.len() != candidates {
        return Some(format!("{} scores for {candidates} candidates", scores.len()));
    }
    let (i, score) = scores.iter().enumerate().find(|(_, s)| !in_range(**s))?;
    Some(format!(
        "the score for node {} (candidate {i}) is {}; scores must be finite, |score| <= 2^53",
        node(i),
        number(*score)
    ))
}

/// The scores of a policy that declares them absolute (contract 0.5's
/// `score-scale`): each in 0..100, as kube's Score plugins give them.
pub fn absolute_score_problem<'a>(scores: &[f64], node: impl Fn(usize) -> &'a str) -> Option<String> {
    let (i, score) = scores.iter().enumerate().find(|(_, s)| !(0.0..=100.0).contains(*s))?;
    Some(format!(
        "the score for node {} (candidate {i}) is {}; the policy declares absolute scores, which lie in 0..100",
        node(i),
        number(*score)
    ))
}

/// An explain-score answer: one breakdown per candidate, each of at most
/// [`MAX_SCORE_PARTS`] named parts with values in a score's range.
pub fn parts_problem(breakdowns: &[Vec<(&str, f64)>], candidates: usize) -> Option<String> {
    if breakdowns.len() != candidates {
        return Some(format!("{} breakdowns for {candidates} candidates", breakdowns.len()));
    }
    for (i, parts) in breakdowns.iter().enumerate() {
        if parts.len() > MAX_SCORE_PARTS {
            return Some(format!("{} parts for candidate {i}, over {MAX_SCORE_PARTS}", parts.len()));
        }
        for &(name, value) in parts {
            if let Some(problem) = within(&format!("a part name of candidate {i}"), name, MAX_PART_NAME_BYTES) {
                return Some(problem);
            }
            if !in_range(value) {
                return Some(format!("part {name:?} of candidate {i} is {}", number(value)));
            }
        }
    }
    None
}

/// The message of an error a policy returns from filter, score or
/// explain-score.
pub fn error_problem(message: &str) -> Option<String> {
    within("its error message", message, MAX_ERROR_BYTES)
}

/// What `describe` says of the policy: a name, strings within their
/// bounds, and at least one phase.
pub fn describe_problem(name: &str, version: &str, description: &str, filter: bool, score: bool) -> Option<String> {
    if name.trim().is_empty() {
        return Some("the policy name is empty".to_string());
    }
    if let Some(problem) = within("its name", name, MAX_NAME_BYTES)
        .or_else(|| within("its version", version, MAX_VERSION_BYTES))
        .or_else(|| within("its description", description, MAX_DESCRIPTION_BYTES))
    {
        return Some(problem);
    }
    if name.chars().chain(version.chars()).any(char::is_control) {
        return Some("its name or version holds control characters".to_string());
    }
    (!filter && !score).then(|| "the policy implements neither filter nor score".to_string())
}

fn in_range(value: f64) -> bool {
    value.is_finite() && value.abs() <= MAX_RAW_SCORE
}

/// A number as these messages print it: `1e300`, `9.1e15`, `NaN`, `inf`.
fn number(value: f64) -> String {
    if value.is_nan() { "NaN".to_string() } else { format!("{value:e}") }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_rule_says_what_is_wrong_and_where() {
        let names = ["a", "b"];
        let node = |i: usize| names[i];
        assert_eq!(score_problem(&[1.0, 2.0], 2, node), None);
        assert_eq!(score_problem(&[MAX_RAW_SCORE, -MAX_RAW_SCORE], 2, node), None);
        assert_eq!(
            score_problem(&[1.0, f64::INFINITY], 2, node).unwrap(),
            "the score for node b (candidate 1) is inf; scores must be finite, |score| <= 2^53"
        );
        assert!(score_problem(&[f64::NAN, 0.0], 2, node).unwrap().contains("node a (candidate 0) is NaN"));
        assert_eq!(score_problem(&[1.0], 2, node).unwrap(), "1 scores for 2 candidates");

        let reasons = |n: usize| vec!["x".to_string(); n];
        assert_eq!(filter_problem(&reasons(1), &[0, 1], 2), None);
        assert_eq!(filter_problem(&[], &[], 0), None);
        assert_eq!(
            filter_problem(&reasons(1), &[0, 2], 2).unwrap(),
            "verdict 2 of candidate 1 names a reason beyond the 1 given"
        );
        assert_eq!(filter_problem(&reasons(3), &[1, 0], 2).unwrap(), "3 reasons for 2 candidates");
        let long = vec!["r".repeat(MAX_REASON_BYTES + 1)];
        assert_eq!(filter_problem(&long, &[1], 1).unwrap(), "reason 0 is 1025 bytes, over the 1024-byte limit");

        let parts = |b: &[Vec<(&str, f64)>]| parts_problem(b, 2);
        assert_eq!(parts(&[vec![("cpu", 1.0)], vec![]]), None);
        assert_eq!(parts(&[vec![("cpu", f64::NAN)], vec![]]).unwrap(), "part \"cpu\" of candidate 0 is NaN");
        assert_eq!(parts(&[vec![], vec![("x", 0.0); 17]]).unwrap(), "17 parts for candidate 1, over 16");
        assert_eq!(parts(&[vec![]]).unwrap(), "1 breakdowns for 2 candidates");

        assert_eq!(describe_problem(" ", "1", "", true, false).unwrap(), "the policy name is empty");
        assert_eq!(
            describe_problem("p", "1\n", "", true, false).unwrap(),
            "its name or version holds control characters"
        );
        assert_eq!(
            describe_problem("p", "1", "", false, false).unwrap(),
            "the policy implements neither filter nor score"
        );
        assert_eq!(
            error_problem(&"e".repeat(4097)).unwrap(),
            "its error message is 4097 bytes, over the 4096-byte limit"
        );
    }
}
