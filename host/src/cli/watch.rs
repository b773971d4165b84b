//! Waiting for files to change, for `simulate --watch` (the policies, their
//! configs and the scenario) and `dev` (a project's sources). Parent
//! directories are watched rather than the files, because builds and
//! editors replace files (write elsewhere, then rename), which a watch on
//! the old file would never see.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::mpsc::{Receiver, channel};
use std::time::Duration;

use notify::{RecursiveMode, Watcher};

pub struct FileWatcher {
    _watcher: notify::RecommendedWatcher,
    events: Receiver<notify::Result<notify::Event>>,
    /// Files of interest, and directories whose every file is of interest.
    files: BTreeSet<PathBuf>,
    dirs: BTreeSet<PathBuf>,
    /// Directories whose every file, at any depth, is of interest (but
    /// what tools write there: `__pycache__`, hidden files).
    trees: BTreeSet<PathBuf>,
}

fn absolute(path: &Path) -> PathBuf {
    std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf())
}

impl FileWatcher {
    /// Watches `paths`: files, or directories (their direct entries).
    pub fn new(paths: &[PathBuf]) -> anyhow::Result<FileWatcher> {
        let (tx, events) = channel();
        let mut watcher = notify::recommended_watcher(tx)?;
        let mut files = BTreeSet::new();
        let mut dirs = BTreeSet::new();
        let mut watched = BTreeSet::new();
        for path in paths {
            let path = absolute(path);
            let dir = if path.is_dir() {
                dirs.insert(path.clone());
                path
            } else {
                files.insert(path.clone());
                path.parent().map(Path::to_path_buf).unwrap_or_else(|| PathBuf::from("/"))
            };
            if watched.insert(dir.clone()) {
                watcher
                    .watch(&dir, RecursiveMode::NonRecursive)
                    .map_err(|e| anyhow::anyhow!("watching {}: {e}", dir.display()))?;
            }
        }
        Ok(FileWatcher { _watcher: watcher, events, files, dirs, trees: BTreeSet::new() })
    }

    /// Watches a project's source trees (`trees`, at any depth) and
    /// `files`, for `wasmsched dev`.
    pub fn sources(trees: &[PathBuf], files: &[PathBuf]) -> anyhow::Result<FileWatcher> {
        let mut watcher = FileWatcher::new(files)?;
        for tree in trees {
            let tree = absolute(tree);
            watcher
                ._watcher
                .watch(&tree, RecursiveMode::Recursive)
                .map_err(|e| anyhow::anyhow!("watching {}: {e}", tree.display()))?;
            watcher.trees.insert(tree);
        }
        Ok(watcher)
    }

    fn in_tree(&self, path: &Path) -> bool {
        let Some(tree) = self.trees.iter().find(|t| path.starts_with(t)) else { return false };
        let inside = path.strip_prefix(tree).unwrap_or(path);
        !inside.components().any(|c| {
            let name = c.as_os_str().to_string_lossy();
            name.starts_with('.') || name == "__pycache__"
        })
    }

    fn relevant(&self, event: &notify::Event) -> Option<PathBuf> {
        if event.kind.is_access() {
            return None;
        }
        // A rename names the new path last: that is the file saved.
        event
            .paths
            .iter()
            .rev()
            .find(|p| self.files.contains(*p) || p.parent().is_some_and(|d| self.dirs.contains(d)) || self.in_tree(p))
            .cloned()
    }

    /// Blocks until a watched file changed and then stayed quiet for
    /// `settle` (a build writes in several steps). Returns one changed path:
    /// a file saved, never an editor's scratch file alone (a burst of
    /// those, such as vim's probe of the directory, is waited past).
    pub fn next_change(&self, settle: Duration) -> anyhow::Result<PathBuf> {
        loop {
            let changed = self.next_burst(settle)?;
            if !is_temporary(&changed) {
                return Ok(changed);
            }
        }
    }

    /// The path a burst of changes is named by.
    fn next_burst(&self, settle: Duration) -> anyhow::Result<PathBuf> {
        let mut changed = loop {
            match self.events.recv()? {
                Ok(event) => {
                    if let Some(path) = self.relevant(&event) {
                        break path;
                    }
                }
                Err(e) => eprintln!("warning: watching files: {e}"),
            }
        };
        // An editor saves through a temporary (`.app.py.swp`, `app.py~`,
        // vim's `4913`): the file to name is the one saved, which a later
        // event of the same save names.
        while let Ok(event) = self.events.recv_timeout(settle) {
            if let Some(path) = event.ok().and_then(|e| self.relevant(&e))
                && (is_temporary(&changed) || !is_temporary(&path))
            {
                changed = path;
            }
        }
        Ok(changed)
    }
}

/// An editor's scratch file rather than one an author saves: hidden,
/// a backup (`~`), a swap or temporary extension, or all digits.
fn is_temporary(path: &Path) -> bool {
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    name.starts_with('.')
        || name.starts_with('#')
        || name.ends_with('~')
        || [".swp", ".swx", ".tmp", ".bak"].iter().any(|ext| name.ends_with(ext))
        || name.contains(".tmp.")
        || (!name.is_empty() && name.bytes().all(|b| b.is_ascii_digit()))
        || !path.exists()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn editors_scratch_files_are_told_from_the_saved_file() {
        let dir = tempfile::tempdir().unwrap();
        let saved = dir.path().join("app.py");
        std::fs::write(&saved, "x = 1\n").unwrap();
        assert!(!is_temporary(&saved));
        for scratch in [".app.py.swp", "app.py~", "4913", "#app.py#", "app.py.tmp.1234", "gone.py"] {
            let path = dir.path().join(scratch);
            if scratch != "gone.py" {
                std::fs::write(&path, "").unwrap();
            }
            assert!(is_temporary(&path), "{scratch}");
        }
    }
}
