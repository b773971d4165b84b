//! Reading a recording back: its files in order, each line bounded in
//! size, the snapshots of the files after the first one skipped (the
//! replay has the state they repeat).

use std::fs::File;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};

use super::entry::{FORMAT, Header, Line};
use super::writer::journal_files;

/// No line of a recording is longer: an object of the API server is at
/// most 1.5 MiB as stored; its JSON here is about as long.
const MAX_LINE: u64 = 8 << 20;

/// A recording, opened: its first file's header, then its lines.
pub struct Journal {
    pub header: Header,
    files: Vec<PathBuf>,
}

/// Opens the recording in `dir`.
pub fn read_journal(dir: &Path) -> Result<Journal, String> {
    let files = journal_files(dir)?;
    let Some(first) = files.first() else {
        return Err(format!(
            "{}: no recording here (journal-*.jsonl files, from `wasmsched run --record`)",
            dir.display()
        ));
    };
    let mut reader = open(first)?;
    let header = read_header(&mut reader, first)?;
    Ok(Journal { header, files })
}

impl Journal {
    /// Every line, in order; a line that cannot be read ends the journal
    /// with its file and line number.
    pub fn lines(&self) -> impl Iterator<Item = Result<Line, String>> + '_ {
        self.files.iter().enumerate().flat_map(|(i, path)| FileLines::open(path, i > 0))
    }
}

fn open(path: &Path) -> Result<BufReader<File>, String> {
    File::open(path).map(BufReader::new).map_err(|e| format!("{}: {e}", path.display()))
}

fn read_header(reader: &mut BufReader<File>, path: &Path) -> Result<Header, String> {
    let text = bounded_line(reader).map_err(|e| format!("{}: line 1: {e}", path.display()))?.unwrap_or_default();
    let header: Header = serde_json::from_str(&text)
        .map_err(|e| format!("{}: line 1: not a recording's header: {e}", path.display()))?;
    if header.format != FORMAT {
        return Err(format!(
            "{}: a recording in format {:?}; this wasmsched reads {FORMAT:?}",
            path.display(),
            header.format
        ));
    }
    Ok(header)
}

/// One line, without its newline; `None` at the end of the file.
fn bounded_line(reader: &mut impl BufRead) -> Result<Option<String>, String> {
    let mut bytes = Vec::new();
    reader.by_ref().take(MAX_LINE + 1).read_until(b'\n', &mut bytes).map_err(|e| e.to_string())?;
    if bytes.is_empty() {
        return Ok(None);
    }
    if bytes.len() as u64 > MAX_LINE {
        return Err(format!("longer than {} MiB", MAX_LINE >> 20));
    }
    if bytes.last() == Some(&b'\n') {
        bytes.pop();
    }
    String::from_utf8(bytes).map(Some).map_err(|_| "not UTF-8".to_string())
}

/// The lines of one file after its header.
struct FileLines {
    path: PathBuf,
    reader: Option<BufReader<File>>,
    number: usize,
    failed: Option<String>,
}

impl FileLines {
    fn open(path: &Path, skip_snapshot: bool) -> FileLines {
        let mut lines = FileLines { path: path.to_path_buf(), reader: None, number: 1, failed: None };
        let opened = open(path).and_then(|mut reader| read_header(&mut reader, path).map(|h| (reader, h)));
        match opened {
            Ok((reader, header)) => {
                lines.reader = Some(reader);
                if skip_snapshot {
                    for _ in 0..header.snapshot_lines {
                        if let Some(Err(e)) = lines.next() {
                            lines.failed = Some(e);
                            break;
                        }
                    }
                }
            }
            Err(e) => lines.failed = Some(e),
        }
        lines
    }
}

impl Iterator for FileLines {
    type Item = Result<Line, String>;

    fn next(&mut self) -> Option<Self::Item> {
        if let Some(e) = self.failed.take() {
            self.reader = None;
            return Some(Err(e));
        }
        let reader = self.reader.as_mut()?;
        self.number += 1;
        let at = |e: String| format!("{}: line {}: {e}", self.path.display(), self.number);
        match bounded_line(reader) {
            Ok(None) => {
                self.reader = None;
                None
            }
            Ok(Some(text)) => Some(serde_json::from_str(&text).map_err(|e| at(e.to_string()))),
            Err(e) => {
                self.reader = None;
                Some(Err(at(e)))
            }
        }
    }
}
