//! CPU time, as budgets count it: the work a compile did, never the time
//! it waited for a core. On a busy machine a compile waits; counting that
//! wait would refuse a tenant for the machine's load (docs/security.md,
//! "Budgets count work").
//!
//! [`measure`] runs a closure and gives the CPU it used: its thread's own,
//! plus what compile children and compile threads used on its behalf,
//! which they [`charge`] to the thread that waited for them.

use std::cell::Cell;
use std::time::Duration;

thread_local! {
    /// CPU used for this thread elsewhere (compile children, compile
    /// threads), since the thread started.
    static ELSEWHERE: Cell<Duration> = const { Cell::new(Duration::ZERO) };
    /// CPU used on this thread, or for it elsewhere, that no budget
    /// counts ([`exempt`]), since the thread started.
    static EXEMPT: Cell<Duration> = const { Cell::new(Duration::ZERO) };
}

/// The CPU time this thread has used so far.
pub fn this_thread() -> Duration {
    #[cfg(unix)]
    {
        let mut now = libc::timespec { tv_sec: 0, tv_nsec: 0 };
        // SAFETY: writes one timespec; the calling thread's CPU clock
        // always exists.
        if unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut now) } == 0 {
            return Duration::new(now.tv_sec.max(0) as u64, now.tv_nsec.clamp(0, 999_999_999) as u32);
        }
    }
    Duration::ZERO
}

/// Counts `cpu`, used on this thread's behalf by a child process or
/// another thread, toward the [`measure`] it runs in.
pub fn charge(cpu: Duration) {
    ELSEWHERE.with(|e| e.set(e.get() + cpu));
}

/// Runs `f` and returns what it returned with the CPU it used: this
/// thread's own time and what was [`charge`]d meanwhile.
pub fn measure<R>(f: impl FnOnce() -> R) -> (R, Duration) {
    let (own, elsewhere, exempt) = (this_thread(), ELSEWHERE.with(Cell::get), EXEMPT.with(Cell::get));
    let out = f();
    let used = this_thread().saturating_sub(own) + ELSEWHERE.with(Cell::get).saturating_sub(elsewhere);
    (out, used.saturating_sub(EXEMPT.with(Cell::get).saturating_sub(exempt)))
}

/// Runs `f`, whose CPU (this thread's and what is charged for it) no
/// enclosing [`measure`] counts: work done for everyone, such as
/// compiling an interpreter that every policy of its language shares.
pub fn exempt<R>(f: impl FnOnce() -> R) -> R {
    let (out, used) = measure(f);
    EXEMPT.with(|e| e.set(e.get() + used));
    out
}

/// Tries a qualifying run (a policy's first calls, its smoke run) gets
/// when each missed its deadline only for want of a core.
pub const STARVED_TRIES: u32 = 5;

/// Runs `f` again, up to `tries` runs in all, while its result missed a
/// deadline (`missed` gives it) having used less CPU than that deadline:
/// on a busy machine the run waited for a core and did not work past its
/// time. A run that used its deadline's CPU is judged as it ended.
pub fn retry_starved<R>(tries: u32, mut f: impl FnMut() -> R, missed: impl Fn(&R) -> Option<Duration>) -> R {
    let mut run = 1;
    loop {
        let (out, used) = measure(&mut f);
        match missed(&out) {
            Some(deadline) if used < deadline && run < tries => run += 1,
            _ => return out,
        }
    }
}

/// The CPU time in a child's resource usage: user and system.
#[cfg(unix)]
pub(crate) fn of_rusage(usage: &libc::rusage) -> Duration {
    let time = |t: libc::timeval| Duration::new(t.tv_sec.max(0) as u64, (t.tv_usec.clamp(0, 999_999) as u32) * 1000);
    time(usage.ru_utime) + time(usage.ru_stime)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    #[test]
    fn waiting_is_not_work_and_working_is() {
        let ((), slept) = measure(|| std::thread::sleep(Duration::from_millis(200)));
        assert!(slept < Duration::from_millis(50), "a sleep used {slept:?} of CPU");
        let ((), spun) = measure(|| {
            let started = this_thread();
            while this_thread() - started < Duration::from_millis(30) {
                std::hint::black_box(Instant::now());
            }
        });
        assert!(spun >= Duration::from_millis(30), "a spin used {spun:?}");
    }

    #[test]
    fn what_others_used_for_this_thread_counts_within_its_measure_only() {
        charge(Duration::from_secs(5));
        let ((), used) = measure(|| charge(Duration::from_secs(2)));
        assert!(used >= Duration::from_secs(2) && used < Duration::from_millis(2100), "{used:?}");
        let ((), other) = measure(|| std::thread::spawn(|| charge(Duration::from_secs(9))).join().unwrap());
        assert!(other < Duration::from_millis(100), "another thread's charge is its own: {other:?}");
    }

    #[test]
    fn exempt_work_counts_toward_no_enclosing_measure() {
        let ((), used) = measure(|| {
            charge(Duration::from_secs(1));
            exempt(|| charge(Duration::from_secs(13)));
        });
        assert!(used >= Duration::from_secs(1) && used < Duration::from_millis(1100), "{used:?}");
    }

    #[test]
    fn a_run_that_missed_its_deadline_waiting_is_run_again_and_one_that_worked_past_it_is_not() {
        let deadline = Duration::from_millis(10);
        let mut waited = 0;
        let out = retry_starved(
            3,
            || {
                waited += 1;
                std::thread::sleep(Duration::from_millis(15));
                waited
            },
            |_| Some(deadline),
        );
        assert_eq!((out, waited), (3, 3), "every run waited: three tries, the last one's result");
        let mut spun = 0;
        retry_starved(
            3,
            || {
                spun += 1;
                let started = this_thread();
                while this_thread() - started < Duration::from_millis(12) {
                    std::hint::black_box(Instant::now());
                }
            },
            |_| Some(deadline),
        );
        assert_eq!(spun, 1, "it used its deadline's CPU: judged as it ended");
        let mut passed = 0;
        retry_starved(3, || passed += 1, |_| None);
        assert_eq!(passed, 1);
    }
}
