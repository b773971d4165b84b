//! The recording's writer: a thread of its own behind a bounded channel,
//! so that turning events into JSON and writing files never delays the
//! scheduling loop. Files are rotated at an eighth of the bound and the
//! oldest removed past it; each new file opens with a snapshot of the
//! objects alive, kept here as the lines that last applied them, and the
//! core's node layout: a full file asks the loop for it, and rotates when
//! it comes, in order with the inputs before it.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, SyncSender, sync_channel};
use std::time::Duration;

use super::entry::{Attempted, BindingRecord, Entry, FORMAT, Header, Line};
use super::redact::redact;
use crate::scheduler::events::{ChangeRecord, EventRecord};
use crate::scheduler::{ClusterEvent, NodeLayout};

/// Inputs the writer may fall behind by before the loop drops them (and
/// counts them) rather than wait.
const QUEUE: usize = 65_536;
/// The smallest file: a bound below eight of these makes fewer files.
const MIN_FILE_BYTES: u64 = 1 << 20;

#[derive(Debug, Clone)]
pub struct RecordSettings {
    pub dir: PathBuf,
    /// The recording's files together stay under this.
    pub max_bytes: u64,
    pub profiles: Vec<String>,
    pub seed: u64,
}

enum Message {
    Event(Duration, ClusterEvent),
    Entry(Duration, Entry),
}

/// The loop's handle on the writer.
pub struct Recorder {
    tx: Option<SyncSender<Message>>,
    dropped: Arc<AtomicU64>,
    /// Sent and not yet taken by the writer.
    queued: Arc<AtomicU64>,
    /// Set by the writer when a file is full: the loop answers with the
    /// core's node layout, and the next file opens with it.
    layout_wanted: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Recorder {
    /// Starts a recording in `dir`, which must not hold one already.
    pub fn start(settings: RecordSettings) -> Result<Recorder, String> {
        let dir = &settings.dir;
        std::fs::create_dir_all(dir).map_err(|e| format!("--record {}: {e}", dir.display()))?;
        if !journal_files(dir)?.is_empty() {
            return Err(format!(
                "--record {}: the directory already holds a recording; move it away or record into another directory",
                dir.display()
            ));
        }
        let layout_wanted = Arc::new(AtomicBool::new(false));
        let mut files = Files::new(settings, layout_wanted.clone())?;
        let (tx, rx) = sync_channel(QUEUE);
        let queued = Arc::new(AtomicU64::new(0));
        let taken = queued.clone();
        let thread = std::thread::Builder::new()
            .name("wasmsched-record".into())
            .spawn(move || files.run(rx, &taken))
            .map_err(|e| format!("starting the recording's writer: {e}"))?;
        Ok(Recorder { tx: Some(tx), dropped: Arc::default(), queued, layout_wanted, thread: Some(thread) })
    }

    pub fn event(&self, t: Duration, event: &ClusterEvent) {
        self.send(Message::Event(t, event.clone()));
    }

    pub fn attempt(&self, t: Duration, attempted: Attempted) {
        self.send(Message::Entry(t, Entry::Attempt(attempted)));
    }

    pub fn binding(&self, t: Duration, binding: BindingRecord) {
        self.send(Message::Entry(t, Entry::Binding(binding)));
    }

    pub fn policies(&self, t: Duration, profile: &str, active: Vec<String>) {
        self.send(Message::Entry(t, Entry::Policies { profile: profile.to_string(), active }));
    }

    pub fn tenant_policies(&self, t: Duration, tenant: &str, active: Vec<String>) {
        self.send(Message::Entry(t, Entry::TenantPolicies { tenant: tenant.to_string(), active }));
    }

    pub fn evaluate(&self, t: Duration, pod: String, attempt: u32) {
        self.send(Message::Entry(t, Entry::Evaluate { pod, attempt }));
    }

    /// Whether the writer asks for the core's node layout (once: the
    /// question is taken by asking).
    pub fn layout_wanted(&self) -> bool {
        self.layout_wanted.swap(false, Ordering::Relaxed)
    }

    pub fn layout(&self, t: Duration, layout: NodeLayout) {
        self.send(Message::Entry(t, Entry::Layout(layout)));
    }

    pub fn permissions(&self, t: Duration, denied: &crate::scheduler::DeniedWrites) {
        self.send(Message::Entry(t, Entry::Permissions(denied.clone())));
    }

    /// Inputs left out because the writer fell behind: a replay of this
    /// recording is then not complete.
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }

    /// Inputs and decisions waiting for the writer.
    pub fn queued(&self) -> u64 {
        self.queued.load(Ordering::Relaxed)
    }

    fn send(&self, message: Message) {
        let Some(tx) = &self.tx else { return };
        // Counted before it can be taken, so the count never goes below 0.
        self.queued.fetch_add(1, Ordering::Relaxed);
        if tx.try_send(message).is_err() {
            self.queued.fetch_sub(1, Ordering::Relaxed);
            if self.dropped.fetch_add(1, Ordering::Relaxed) == 0 {
                tracing::warn!(
                    "the recording's writer fell behind: inputs are being left out, and a replay will not be complete"
                );
            }
        }
    }
}

impl Drop for Recorder {
    /// Writes what is queued and closes the file.
    fn drop(&mut self) {
        self.tx.take();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// The files of a recording in `dir`, oldest first.
pub(super) fn journal_files(dir: &Path) -> Result<Vec<PathBuf>, String> {
    let entries = std::fs::read_dir(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let mut files: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| {
            p.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with("journal-") && n.ends_with(".jsonl"))
        })
        .collect();
    files.sort();
    Ok(files)
}

/// The writer's side: the open file and what a snapshot needs.
struct Files {
    settings: RecordSettings,
    started: String,
    segment: u64,
    out: BufWriter<File>,
    written: u64,
    /// Of `written`, the snapshot's: a file rotates on what came after it,
    /// or a snapshot larger than a file would rotate at every line.
    snapshot_bytes: u64,
    /// The recording's files, oldest first, with their sizes.
    kept: Vec<(PathBuf, u64)>,
    /// Each live object's last applying line, by (resource, namespace,
    /// name); and the settings in force (resources starting with `~`).
    alive: BTreeMap<(String, String, String), String>,
    /// Pods placed whose copy does not carry the node yet (`namespace/name`
    /// → node, and whether the binding answered): a snapshot says so.
    placed: BTreeMap<String, (String, bool)>,
    layout_wanted: Arc<AtomicBool>,
    /// This file is full and the layout was asked for, when it had this
    /// many bytes.
    asked_at: Option<u64>,
    failed: bool,
}

impl Files {
    fn new(settings: RecordSettings, layout_wanted: Arc<AtomicBool>) -> Result<Files, String> {
        let started = jiff::Timestamp::now().to_string();
        let path = settings.dir.join("journal-000001.jsonl");
        let out = BufWriter::new(File::create(&path).map_err(|e| format!("{}: {e}", path.display()))?);
        let mut files = Files {
            settings,
            started,
            segment: 1,
            out,
            written: 0,
            snapshot_bytes: 0,
            kept: vec![(path, 0)],
            alive: BTreeMap::new(),
            placed: BTreeMap::new(),
            layout_wanted,
            asked_at: None,
            failed: false,
        };
        files.header(0);
        Ok(files)
    }

    fn file_bytes(&self) -> u64 {
        (self.settings.max_bytes / 8).max(MIN_FILE_BYTES)
    }

    fn run(&mut self, rx: Receiver<Message>, queued: &AtomicU64) {
        loop {
            let next = rx.recv_timeout(Duration::from_millis(500));
            if next.is_ok() {
                queued.fetch_sub(1, Ordering::Relaxed);
            }
            match next {
                Ok(Message::Event(t, event)) => self.event(t, &event),
                Ok(Message::Entry(t, Entry::Layout(layout))) => self.rotate_with(nanos(t), layout),
                Ok(Message::Entry(t, entry)) => {
                    let line = Line { t: nanos(t), entry };
                    let text = self.line(&line);
                    self.remember_setting(&line.entry, text);
                    self.remember_placed(&line.entry);
                    self.rotate_if_full();
                }
                Err(RecvTimeoutError::Timeout) => self.flush(),
                Err(RecvTimeoutError::Disconnected) => break,
            }
        }
        self.flush();
    }

    fn event(&mut self, t: Duration, event: &ClusterEvent) {
        let mut record = match event.to_record() {
            Ok(record) => record,
            Err(e) => return tracing::warn!(error = %e, "an event could not be recorded"),
        };
        if let ChangeRecord::Applied(object) = &mut record.change {
            redact(object);
        }
        let line = Line { t: nanos(t), entry: Entry::Event(record) };
        let text = self.line(&line);
        let Entry::Event(record) = &line.entry else { return };
        self.remember(record, text);
        self.rotate_if_full();
    }

    /// Keeps the snapshot's view of the live objects up to date.
    fn remember(&mut self, record: &EventRecord, text: Option<String>) {
        let resource = record.resource.clone();
        match &record.change {
            ChangeRecord::Applied(object) => {
                let meta = &object["metadata"];
                let key = |f: &str| meta[f].as_str().unwrap_or_default().to_string();
                if resource == "pods" && object["spec"]["nodeName"].is_string() {
                    self.placed.remove(&format!("{}/{}", key("namespace"), key("name")));
                }
                if let Some(text) = text {
                    self.alive.insert((resource, key("namespace"), key("name")), text);
                }
            }
            ChangeRecord::Deleted { namespace, name, .. } => {
                if resource == "pods" {
                    self.placed.remove(&format!("{namespace}/{name}"));
                }
                self.alive.remove(&(resource, namespace.clone(), name.clone()));
            }
            ChangeRecord::Listed(keys) => {
                let listed: std::collections::HashSet<(&str, &str)> =
                    keys.iter().map(|(ns, n)| (ns.as_str(), n.as_str())).collect();
                self.alive.retain(|(r, ns, n), _| *r != resource || listed.contains(&(ns.as_str(), n.as_str())));
            }
        }
    }

    /// Policies and permissions in force go into a snapshot too: a replay
    /// from a later file starts with them.
    fn remember_setting(&mut self, entry: &Entry, text: Option<String>) {
        let key = match entry {
            Entry::Policies { profile, .. } => ("~policies".to_string(), profile.clone(), String::new()),
            Entry::TenantPolicies { tenant, .. } => ("~tenantpolicies".to_string(), tenant.clone(), String::new()),
            Entry::Permissions(_) => ("~permissions".to_string(), String::new(), String::new()),
            _ => return,
        };
        match text {
            Some(text) => self.alive.insert(key, text),
            None => self.alive.remove(&key),
        };
    }

    /// Keeps which pods the core placed before their copies say so.
    fn remember_placed(&mut self, entry: &Entry) {
        match entry {
            Entry::Attempt(a) => {
                match &a.node {
                    Some(node) => self.placed.insert(a.pod.clone(), (node.clone(), false)),
                    None => self.placed.remove(&a.pod),
                };
            }
            Entry::Binding(b) if b.outcome == "bound" => {
                if let Some(placed) = self.placed.get_mut(&b.pod) {
                    placed.1 = true;
                }
            }
            Entry::Binding(b) => {
                self.placed.remove(&b.pod);
            }
            _ => {}
        }
    }

    /// Writes one line; returns its text for the snapshot's memory.
    fn line(&mut self, line: &Line) -> Option<String> {
        let text = serde_json::to_string(line).ok()?;
        self.write(&text);
        Some(text)
    }

    /// Once this file is full (after its last line is remembered, so the
    /// next file's snapshot holds what it said), asks for the layout; and
    /// again every eighth of a file after, in case the answer was dropped
    /// with a full queue.
    fn rotate_if_full(&mut self) {
        let again = self.asked_at.is_none_or(|at| self.written >= at + self.file_bytes() / 8);
        if again && self.written - self.snapshot_bytes >= self.file_bytes() {
            self.asked_at = Some(self.written);
            self.layout_wanted.store(true, Ordering::Relaxed);
        }
    }

    /// The layout asked for: the next file opens with it.
    fn rotate_with(&mut self, t: u64, layout: NodeLayout) {
        if self.asked_at.take().is_some() {
            self.rotate(t, layout);
        }
    }

    fn write(&mut self, text: &str) {
        if self.failed {
            return;
        }
        if let Err(e) = writeln!(self.out, "{text}") {
            self.failed = true;
            return tracing::error!(error = %e, dir = %self.settings.dir.display(), "the recording stopped: a file could not be written");
        }
        self.written += text.len() as u64 + 1;
    }

    fn header(&mut self, snapshot_lines: usize) {
        let header = Header {
            format: FORMAT.into(),
            segment: self.segment,
            started: self.started.clone(),
            profiles: self.settings.profiles.clone(),
            seed: self.settings.seed,
            snapshot_lines,
        };
        if let Ok(text) = serde_json::to_string(&header) {
            self.write(&text);
        }
    }

    /// A new file, opening with the live objects (pods last, so that
    /// their nodes come first); the oldest files go past the bound.
    fn rotate(&mut self, t: u64, layout: NodeLayout) {
        self.flush();
        if let Some(last) = self.kept.last_mut() {
            last.1 = self.written;
        }
        self.segment += 1;
        let path = self.settings.dir.join(format!("journal-{:06}.jsonl", self.segment));
        match File::create(&path) {
            Ok(file) => self.out = BufWriter::new(file),
            Err(e) => {
                self.failed = true;
                return tracing::error!(error = %e, path = %path.display(), "the recording stopped: a file could not be created");
            }
        }
        self.written = 0;
        self.kept.push((path, 0));
        let mut snapshot: Vec<String> =
            serde_json::to_string(&Line { t, entry: Entry::Layout(layout) }).into_iter().collect();
        let (pods, rest): (Vec<_>, Vec<_>) = self.alive.iter().partition(|((r, _, _), _)| r == "pods");
        snapshot.extend(rest.into_iter().chain(pods).map(|(_, text)| retimed(text, t)));
        // Then where the core had placed pods whose copies do not say so.
        for (pod, (node, bound)) in &self.placed {
            let entry = Entry::Assumed { pod: pod.clone(), node: node.clone(), bound: *bound };
            snapshot.extend(serde_json::to_string(&Line { t, entry }).ok());
        }
        self.header(snapshot.len());
        for text in &snapshot {
            self.write(text);
        }
        self.snapshot_bytes = self.written;
        self.forget_oldest();
    }

    /// Makes room for the new file as it will be when it rotates (its
    /// snapshot and a file's worth after it), so that the files together
    /// stay under the bound all along, not only at the moment of rotating.
    fn forget_oldest(&mut self) {
        let total = |kept: &[(PathBuf, u64)]| kept.iter().map(|(_, n)| n).sum::<u64>();
        let full = self.written + self.file_bytes();
        while self.kept.len() > 1 && total(&self.kept) + full > self.settings.max_bytes {
            let (path, _) = self.kept.remove(0);
            if let Err(e) = std::fs::remove_file(&path) {
                tracing::warn!(error = %e, path = %path.display(), "an old recording file could not be removed");
            }
        }
    }

    fn flush(&mut self) {
        if !self.failed
            && let Err(e) = self.out.flush()
        {
            self.failed = true;
            tracing::error!(error = %e, "the recording stopped: a file could not be written");
        }
    }
}

/// A remembered line at the snapshot's time.
fn retimed(text: &str, t: u64) -> String {
    match serde_json::from_str::<Line>(text) {
        Ok(mut line) => {
            line.t = t;
            serde_json::to_string(&line).unwrap_or_else(|_| text.to_string())
        }
        Err(_) => text.to_string(),
    }
}

fn nanos(t: Duration) -> u64 {
    u64::try_from(t.as_nanos()).unwrap_or(u64::MAX)
}
