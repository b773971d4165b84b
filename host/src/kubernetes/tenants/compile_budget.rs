//! Each tenant's share of the compile slots: the time its validations
//! took over a sliding window. Compile slots are shared by every tenant,
//! and each compile may take up to its bound (30 s by default), so a few
//! namespaces updating hostile components over and over could keep every
//! slot busy; past its budget a tenant's updates are refused until its
//! window frees, and the other tenants' compiles go on.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

/// Compile time one tenant may spend per window: two of its compile
/// bounds (a stopped compile and its fix) every ten minutes.
pub const TENANT_COMPILE_BUDGET: (Duration, Duration) = (Duration::from_secs(60), Duration::from_secs(600));

#[derive(Debug)]
pub struct CompileBudget {
    per_window: Duration,
    window: Duration,
    /// When each validation ended, and how long it took.
    spent: VecDeque<(Instant, Duration)>,
}

impl CompileBudget {
    pub fn new((per_window, window): (Duration, Duration)) -> Self {
        CompileBudget { per_window, window, spent: VecDeque::new() }
    }

    /// Why this tenant may not compile at `now`, with when it may again.
    pub fn refusal(&mut self, now: Instant) -> Option<String> {
        while self.spent.front().is_some_and(|(at, _)| now.duration_since(*at) >= self.window) {
            self.spent.pop_front();
        }
        let total: Duration = self.spent.iter().map(|(_, took)| *took).sum();
        if total < self.per_window {
            return None;
        }
        // The window frees as its oldest compiles leave it.
        let mut left = total;
        let mut wait = Duration::ZERO;
        for (at, took) in &self.spent {
            left = left.saturating_sub(*took);
            wait = (*at + self.window).saturating_duration_since(now);
            if left < self.per_window {
                break;
            }
        }
        Some(format!(
            "this namespace's policies took {:.0?} to compile within the last {:?}, past its budget of {:?}; \
             try again in {}s (a policy that compiles that long is one no real policy resembles)",
            total,
            self.window,
            self.per_window,
            wait.as_secs().max(1)
        ))
    }

    pub fn spend(&mut self, now: Instant, took: Duration) {
        self.spent.push_back((now, took));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn past_its_budget_a_tenant_waits_for_its_window_to_free() {
        let mut budget = CompileBudget::new((Duration::from_secs(60), Duration::from_secs(600)));
        let t0 = Instant::now();
        assert_eq!(budget.refusal(t0), None);
        budget.spend(t0, Duration::from_secs(30));
        assert_eq!(budget.refusal(t0), None, "one stopped compile leaves room for its fix");
        budget.spend(t0 + Duration::from_secs(40), Duration::from_secs(30));
        let said = budget.refusal(t0 + Duration::from_secs(50)).unwrap();
        assert!(
            said.contains("took 60s to compile within the last 600s") && said.contains("try again in 550s"),
            "{said}"
        );
        assert_eq!(budget.refusal(t0 + Duration::from_secs(600)), None, "the first compile left the window");
    }
}
