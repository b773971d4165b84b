//! One thread per tenant runs that tenant's policy jobs, in order, and
//! sends each verdict back to the scheduling loop. A tenant whose policy
//! loops until its deadline, traps or runs out of memory keeps only its own
//! thread busy: other tenants and every profile keep their pace.

use std::collections::HashMap;
use std::sync::mpsc::{Sender, channel};

use crate::scheduler::{TenantJob, TenantVerdict};

/// Verdicts go back on `verdicts`, converted into the loop's input.
pub struct TenantWorkers<T> {
    verdicts: Sender<T>,
    workers: HashMap<String, Sender<Box<TenantJob>>>,
}

impl<T: From<Box<TenantVerdict>> + Send + 'static> TenantWorkers<T> {
    pub fn new(verdicts: Sender<T>) -> Self {
        TenantWorkers { verdicts, workers: HashMap::new() }
    }

    /// Queues `job` on its tenant's thread, starting the thread if needed.
    /// Every job is answered (see [`TenantJob::run`]), so no pod is lost.
    pub fn submit(&mut self, job: Box<TenantJob>) {
        let tenant = job.tenant.clone();
        let job = match self.workers.get(&tenant) {
            Some(worker) => match worker.send(job) {
                Ok(()) => return,
                // The thread is gone (it never panics, but be sure).
                Err(returned) => returned.0,
            },
            None => job,
        };
        let (tx, rx) = channel::<Box<TenantJob>>();
        let verdicts = self.verdicts.clone();
        let spawned = std::thread::Builder::new().name(format!("tenant {tenant}")).spawn(move || {
            while let Ok(job) = rx.recv() {
                if verdicts.send(T::from(Box::new(job.run()))).is_err() {
                    return;
                }
            }
        });
        match spawned {
            Ok(_) => {
                let _ = tx.send(job);
                self.workers.insert(tenant, tx);
            }
            Err(e) => {
                // No thread: answer here rather than lose the pod.
                tracing::error!(%tenant, error = %e, "cannot start a tenant policy thread; evaluating inline");
                let _ = self.verdicts.send(T::from(Box::new(job.run())));
            }
        }
    }

    /// The tenant has no policies any more: its thread finishes the jobs it
    /// has and exits.
    pub fn retire(&mut self, tenant: &str) {
        self.workers.remove(tenant);
    }
}
