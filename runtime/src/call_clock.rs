//! A call's deadline, counted in the CPU time of the thread that runs it:
//! on a busy machine a call waits for a core, and that wait is the
//! machine's, not the policy's (docs/security.md, "Budgets count work").
//! The epoch ticker wakes the call at its deadline in wall time (CPU time
//! can only be less); the callback then lets it go on for as long as its
//! CPU time is under the deadline, and stops it there, or at the
//! wall-clock backstop, [`WALL_BACKSTOP_FACTOR`] times the deadline, so a
//! call that cannot get a core still ends.

use std::time::{Duration, Instant};

use wasmtime::UpdateDeadline;

use crate::cpu_time;
use crate::ticker::EPOCH_TICK;

/// A call's wall-clock bound, in multiples of its deadline.
pub const WALL_BACKSTOP_FACTOR: u32 = 10;

/// Why a call was stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Stopped {
    /// It used its deadline's CPU time.
    Cpu,
    /// It ran [`WALL_BACKSTOP_FACTOR`] times its deadline in wall time
    /// without using it in CPU time: it could not get a core.
    Wall,
}

/// The clock of the call in progress.
#[derive(Debug, Clone, Copy)]
pub(crate) struct CallClock {
    deadline: Duration,
    cpu_started: Duration,
    wall_started: Instant,
    pub(crate) stopped: Option<Stopped>,
}

impl CallClock {
    /// A call starting now on this thread.
    pub(crate) fn start(deadline: Duration) -> Self {
        CallClock { deadline, cpu_started: cpu_time::this_thread(), wall_started: Instant::now(), stopped: None }
    }

    /// Ticks until the first look: at least `deadline` of wall time, which
    /// is the soonest its CPU time can have passed the deadline.
    pub(crate) fn first_ticks(&self) -> u64 {
        ticks(self.deadline)
    }

    /// At an epoch deadline: go on for what is left of its CPU time, or
    /// stop it.
    pub(crate) fn decide(&mut self) -> UpdateDeadline {
        let cpu = cpu_time::this_thread().saturating_sub(self.cpu_started);
        let wall = self.wall_started.elapsed();
        let judged = judge(self.deadline, cpu, wall);
        if let Err(stopped) = judged {
            self.stopped = Some(stopped);
        }
        match judged {
            Ok(left) => UpdateDeadline::Continue(ticks(left)),
            Err(_) => UpdateDeadline::Interrupt,
        }
    }
}

/// The CPU time left to a call that used `cpu` in `wall`, or why it stops.
fn judge(deadline: Duration, cpu: Duration, wall: Duration) -> Result<Duration, Stopped> {
    if cpu >= deadline {
        return Err(Stopped::Cpu);
    }
    if wall >= deadline.saturating_mul(WALL_BACKSTOP_FACTOR) {
        return Err(Stopped::Wall);
    }
    Ok(deadline - cpu)
}

/// Ticks to wait so that at least `time` passes: the current tick is
/// partly over, so add one.
pub(crate) fn ticks(time: Duration) -> u64 {
    (time.as_nanos().div_ceil(EPOCH_TICK.as_nanos()) as u64).max(1) + 1
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_call_goes_on_while_its_cpu_is_under_the_deadline_and_stops_at_it_or_at_the_backstop() {
        let ms = Duration::from_millis;
        assert_eq!(judge(ms(50), ms(10), ms(60)), Ok(ms(40)), "waited for a core: goes on for its CPU left");
        assert_eq!(judge(ms(50), ms(50), ms(55)), Err(Stopped::Cpu));
        assert_eq!(judge(ms(50), ms(20), ms(500)), Err(Stopped::Wall), "ten times its deadline without a core");
        assert_eq!(judge(ms(50), ms(20), ms(499)), Ok(ms(30)));
    }

    #[test]
    fn a_waiting_call_is_not_stopped_and_a_spinning_one_is() {
        let mut waiting = CallClock::start(Duration::from_millis(20));
        std::thread::sleep(Duration::from_millis(40));
        assert!(matches!(waiting.decide(), UpdateDeadline::Continue(_)), "a sleep uses no CPU");
        let mut spinning = CallClock::start(Duration::from_millis(20));
        let started = cpu_time::this_thread();
        while cpu_time::this_thread() - started < Duration::from_millis(25) {
            std::hint::black_box(Instant::now());
        }
        assert!(matches!(spinning.decide(), UpdateDeadline::Interrupt));
        assert_eq!(spinning.stopped, Some(Stopped::Cpu));
    }
}
