//! Each tenant's share of the compile slots: the CPU its validations used
//! over a sliding window. Compile slots are shared by every tenant, and
//! each compile may take up to its bound, so a few namespaces updating
//! hostile components over and over could keep every slot busy; past its
//! budget a tenant's updates are refused until its window frees, and the
//! other tenants' compiles go on.
//!
//! The budget counts CPU (the compile child's own usage and the validating
//! thread's), never wall time: on a busy machine a compile waits for a
//! core, and that wait is the machine's, not the tenant's
//! (docs/security.md, "Budgets count work").

use std::collections::VecDeque;
use std::time::{Duration, Instant};

/// The CPU one tenant's validations may use per window
/// (`tenants.compileBudget`, `tenants.compileBudgetWindow`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BudgetSettings {
    pub cpu: Duration,
    pub window: Duration,
}

/// A minute of CPU every ten minutes: many times what real policies use
/// (a Rust policy compiles in tens of milliseconds, a 4 MiB one in
/// seconds), and two compiles stopped at their bound only if they had a
/// core all along.
impl Default for BudgetSettings {
    fn default() -> Self {
        BudgetSettings { cpu: Duration::from_secs(60), window: Duration::from_secs(600) }
    }
}

#[derive(Debug)]
pub struct CompileBudget {
    per_window: Duration,
    window: Duration,
    /// When each validation ended, and the CPU it used.
    spent: VecDeque<(Instant, Duration)>,
}

impl CompileBudget {
    pub fn new(settings: BudgetSettings) -> Self {
        CompileBudget { per_window: settings.cpu, window: settings.window, spent: VecDeque::new() }
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
            "this namespace's policies used {:.0?} of CPU to compile within the last {:?}, past its budget of {:?}; \
             try again in {}s (a policy that compiles that long is one no real policy resembles)",
            total,
            self.window,
            self.per_window,
            wait.as_secs().max(1)
        ))
    }

    /// Counts a validation that ended at `now` and used `cpu`.
    pub fn spend(&mut self, now: Instant, cpu: Duration) {
        self.spent.push_back((now, cpu));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn budget() -> CompileBudget {
        CompileBudget::new(BudgetSettings { cpu: Duration::from_secs(60), window: Duration::from_secs(600) })
    }

    #[test]
    fn past_its_budget_a_tenant_waits_for_its_window_to_free() {
        let mut budget = budget();
        let t0 = Instant::now();
        assert_eq!(budget.refusal(t0), None);
        budget.spend(t0, Duration::from_secs(30));
        assert_eq!(budget.refusal(t0), None, "one stopped compile leaves room for its fix");
        budget.spend(t0 + Duration::from_secs(40), Duration::from_secs(30));
        let said = budget.refusal(t0 + Duration::from_secs(50)).unwrap();
        assert!(
            said.contains("used 60s of CPU to compile within the last 600s") && said.contains("try again in 550s"),
            "{said}"
        );
        assert_eq!(budget.refusal(t0 + Duration::from_secs(600)), None, "the first compile left the window");
    }
}
