//! Where shadow candidates run in `wasmsched run`: one thread of their
//! own, by default at idle priority, fed through a bounded queue, so shadow
//! work never takes a turn of the scheduling loop or an attempt's workers.
//! When it falls behind, an attempt's shadow work is dropped and counted,
//! never queued without bound; what it finds goes to the metrics and
//! `/experiments`. `shadowWork` trades that for complete counts.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{SyncSender, TrySendError};
use std::sync::{Arc, Mutex};

use crate::scheduler::ShadowOutbox;
use crate::scheduler::experiments::Experiments;
use crate::scheduler::experiments::shadow::CandidateKey;
use crate::scheduler::experiments::shadow::{MAX_SHADOW_JOBS, ShadowJob};
use crate::scheduler_metrics::SchedulerMetrics;

/// How shadow work shares the machine (`shadowWork` in the configuration
/// file).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ShadowWork {
    pub priority: ShadowPriority,
    /// Jobs waiting or running, at most (1 to [`MAX_SHADOW_JOBS`]).
    pub backlog: usize,
}

impl Default for ShadowWork {
    fn default() -> Self {
        ShadowWork { priority: ShadowPriority::Idle, backlog: 4 }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Deserialize)]
pub enum ShadowPriority {
    /// Only a core's spare time: on a busy node little shadow work is done,
    /// and the rest is counted as dropped.
    Idle,
    /// A share of the CPU like the scheduling threads': every sampled
    /// attempt is evaluated while the backlog has room, at some cost to
    /// the deciding threads on a busy node.
    Normal,
}

pub struct ShadowWorker {
    metrics: Arc<SchedulerMetrics>,
    /// What the candidates would have done, as `/experiments` shows it.
    experiments: Arc<Mutex<Experiments>>,
    /// Started with the first job.
    jobs: Option<SyncSender<ShadowJob>>,
    /// Jobs sent and not finished.
    queued: Arc<AtomicUsize>,
    settings: ShadowWork,
}

impl ShadowWorker {
    pub fn new(metrics: Arc<SchedulerMetrics>, experiments: Arc<Mutex<Experiments>>, settings: ShadowWork) -> Self {
        ShadowWorker { metrics, experiments, jobs: None, queued: Arc::new(AtomicUsize::new(0)), settings }
    }

    /// How many more jobs it can take now: the backlog's room.
    /// An attempt's job costs the scheduling thread a copy of the
    /// attempt's pass, so jobs are made only as fast as the thread runs
    /// them; the others are counted as dropped without that copy.
    pub fn room(&self) -> usize {
        self.settings.backlog.saturating_sub(self.queued.load(Ordering::Relaxed))
    }

    /// Queues what the last attempts left for the candidates; what does not
    /// fit is counted as dropped.
    pub fn submit(&mut self, work: ShadowOutbox) {
        for (key, n) in work.dropped {
            self.dropped(&key, n);
        }
        for job in work.jobs {
            let Some(jobs) = self.sender() else { return };
            match jobs.try_send(job) {
                Ok(()) => {
                    self.queued.fetch_add(1, Ordering::Relaxed);
                }
                Err(TrySendError::Full(job) | TrySendError::Disconnected(job)) => self.dropped(&job.key(), 1),
            }
        }
    }

    fn dropped(&self, key: &CandidateKey, n: u64) {
        self.metrics.shadow_dropped(key, n);
        self.experiments.lock().unwrap_or_else(|e| e.into_inner()).dropped(key, n);
    }

    fn sender(&mut self) -> Option<&SyncSender<ShadowJob>> {
        if self.jobs.is_none() {
            let (tx, rx) = std::sync::mpsc::sync_channel::<ShadowJob>(MAX_SHADOW_JOBS);
            let (metrics, experiments, queued) = (self.metrics.clone(), self.experiments.clone(), self.queued.clone());
            let priority = self.settings.priority;
            let spawned = std::thread::Builder::new().name("shadow".into()).spawn(move || {
                if priority == ShadowPriority::Idle {
                    idle_priority();
                }
                for job in rx {
                    let result = job.run();
                    metrics.shadow(&result);
                    experiments.lock().unwrap_or_else(|e| e.into_inner()).record(result);
                    queued.fetch_sub(1, Ordering::Relaxed);
                }
            });
            match spawned {
                Ok(_) => self.jobs = Some(tx),
                Err(e) => {
                    tracing::warn!(error = %e, "cannot start the shadow candidates' thread; their work is dropped")
                }
            }
        }
        self.jobs.as_ref()
    }
}

/// Runs this thread only when a core would otherwise idle (Linux's
/// SCHED_IDLE): shadow work takes spare time, never the deciding threads'.
/// Where the scheduler cannot be changed, the thread runs as any other and
/// the bounded queue still drops what falls behind.
fn idle_priority() {
    #[cfg(target_os = "linux")]
    {
        let param = libc::sched_param { sched_priority: 0 };
        // SAFETY: sets the calling thread's (pid 0) policy with a valid,
        // initialised parameter; no memory is shared.
        let done = unsafe { libc::sched_setscheduler(0, libc::SCHED_IDLE, &param) };
        if done != 0 {
            tracing::debug!(error = %std::io::Error::last_os_error(), "shadow thread: SCHED_IDLE refused");
        }
    }
}
