//! The native harness fails a test where the scheduler would refuse the
//! policy's answer, in the scheduler's words (`wasmsched_rules::answers`),
//! so that no policy passes its tests and then fails in the cluster.

use std::panic::{AssertUnwindSafe, catch_unwind};

use wasmsched_sdk::testing::{Harness, NodeBuilder, PodBuilder};
use wasmsched_sdk::{Attempt, Config, NodeView, Phases, Pod, Policy, ScoreParts};

/// Answers badly in the way its pod's name says.
struct Bad;

impl Policy for Bad {
    const NAME: &'static str = "bad";
    const VERSION: &'static str = "0";
    const PHASES: Phases = Phases::FILTER_AND_SCORE;

    fn new(_config: &Config) -> Result<Self, String> {
        Ok(Bad)
    }

    fn filter(&self, _attempt: &Attempt<'_>, pod: &Pod, _node: &NodeView<'_>) -> Result<(), String> {
        match pod.name.as_str() {
            "long-reason" => Err("r".repeat(1025)),
            _ => Ok(()),
        }
    }

    fn score_all(&self, _attempt: &Attempt<'_>, pod: &Pod, nodes: &[NodeView<'_>]) -> Result<Vec<f64>, String> {
        match pod.name.as_str() {
            "nan" => Ok(nodes.iter().map(|n| if n.name == "b" { f64::NAN } else { 1.0 }).collect()),
            "huge" => Ok(vec![1e300; nodes.len()]),
            "short" => Ok(vec![1.0]),
            "edge" => Ok(vec![9_007_199_254_740_992.0; nodes.len()]),
            "long-error" => Err("e".repeat(4097)),
            _ => Ok(vec![0.0; nodes.len()]),
        }
    }

    fn score_parts(&self, _attempt: &Attempt<'_>, pod: &Pod, _node: &NodeView<'_>) -> Option<ScoreParts> {
        let parts = ScoreParts::new();
        Some(match pod.name.as_str() {
            "many-parts" => (0..17).fold(parts, |p, i| p.add(&format!("p{i}"), 1.0)),
            "inf-part" => parts.add("cpu", f64::INFINITY),
            _ => parts.add("cpu", 1.0),
        })
    }
}

struct Nameless;

impl Policy for Nameless {
    const NAME: &'static str = " ";
    const VERSION: &'static str = "0";
    const PHASES: Phases = Phases::SCORE;

    fn new(_config: &Config) -> Result<Self, String> {
        Ok(Nameless)
    }
}

fn harness() -> Harness<Bad> {
    let mut h = Harness::<Bad>::new();
    h.add_node(NodeBuilder::new("a").cpu("4").memory("8Gi"));
    h.add_node(NodeBuilder::new("b").cpu("4").memory("8Gi"));
    h
}

fn panic_text(f: impl FnOnce()) -> String {
    let payload = catch_unwind(AssertUnwindSafe(f)).expect_err("the harness accepted it");
    payload.downcast_ref::<String>().cloned().unwrap_or_default()
}

#[test]
fn scores_the_scheduler_refuses_fail_in_its_words() {
    let rule = "scores must be finite, |score| <= 2^53";
    let mut h = harness();
    let score = |h: &mut Harness<Bad>, pod: &str| h.try_score(&PodBuilder::new(pod), 0).unwrap_err();
    assert_eq!(
        score(&mut h, "nan"),
        format!("bad: malformed score result: the score for node b (candidate 1) is NaN; {rule}")
    );
    assert_eq!(
        score(&mut h, "huge"),
        format!("bad: malformed score result: the score for node a (candidate 0) is 1e300; {rule}")
    );
    assert_eq!(score(&mut h, "short"), "bad: malformed score result: 1 scores for 2 candidates");
    assert_eq!(
        score(&mut h, "long-error"),
        "bad: malformed score result: its error message is 4097 bytes, over the 4096-byte limit"
    );
    assert!(h.try_score(&PodBuilder::new("edge"), 0).is_ok(), "2^53 itself is within the range");
}

#[test]
fn filters_and_breakdowns_the_scheduler_refuses_fail_in_its_words() {
    let mut h = harness();
    assert_eq!(
        panic_text(|| drop(h.filter(&PodBuilder::new("long-reason")))),
        "bad: malformed filter result: reason 0 is 1025 bytes, over the 1024-byte limit"
    );
    let mut h = harness();
    assert_eq!(
        panic_text(|| drop(h.explain(&PodBuilder::new("many-parts")))),
        "bad: malformed explain-score result: 17 parts for candidate 0, over 16"
    );
    let mut h = harness();
    assert_eq!(
        panic_text(|| drop(h.explain(&PodBuilder::new("inf-part")))),
        "bad: malformed explain-score result: part \"cpu\" of candidate 0 is inf"
    );
    assert_eq!(harness().filter(&PodBuilder::new("fine")).len(), 2);
}

#[test]
fn a_description_the_scheduler_refuses_fails_before_any_call() {
    assert_eq!(
        panic_text(|| drop(Harness::<Nameless>::new())),
        " : malformed describe result: the policy name is empty"
    );
}
