//! Where shadow candidates run in `wasmsched run`: one thread of their
//! own, fed through a bounded queue, so shadow work never takes a turn of
//! the scheduling loop or an attempt's workers. When it falls behind, an
//! attempt's shadow work is dropped and counted, never queued without
//! bound; what it finds goes to the metrics and `/experiments`.

use std::sync::Arc;
use std::sync::mpsc::{SyncSender, TrySendError};

use crate::kubernetes::scheduler_status::SchedulerStatus;
use crate::scheduler::ShadowOutbox;
use crate::scheduler::shadow::{MAX_SHADOW_JOBS, ShadowJob};

pub struct ShadowWorker {
    status: Arc<SchedulerStatus>,
    /// Started with the first job.
    jobs: Option<SyncSender<ShadowJob>>,
}

impl ShadowWorker {
    pub fn new(status: Arc<SchedulerStatus>) -> Self {
        ShadowWorker { status, jobs: None }
    }

    /// Queues what the last attempts left for the candidates; what does not
    /// fit is counted as dropped.
    pub fn submit(&mut self, work: ShadowOutbox) {
        for ((profile, candidate), n) in work.dropped {
            self.dropped(&profile, &candidate, n);
        }
        for job in work.jobs {
            let Some(jobs) = self.sender() else { return };
            match jobs.try_send(job) {
                Ok(()) => {}
                Err(TrySendError::Full(job) | TrySendError::Disconnected(job)) => {
                    self.dropped(&job.profile, &job.candidate, 1)
                }
            }
        }
    }

    fn dropped(&self, profile: &str, candidate: &str, n: u64) {
        self.status.metrics.shadow_dropped(profile, candidate, n);
        self.status.experiments().dropped(profile, candidate, n);
    }

    fn sender(&mut self) -> Option<&SyncSender<ShadowJob>> {
        if self.jobs.is_none() {
            let (tx, rx) = std::sync::mpsc::sync_channel::<ShadowJob>(MAX_SHADOW_JOBS);
            let status = self.status.clone();
            let spawned = std::thread::Builder::new().name("shadow".into()).spawn(move || {
                for job in rx {
                    let result = job.run();
                    status.metrics.shadow(&result);
                    status.experiments().record(result);
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
