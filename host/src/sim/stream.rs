//! A cluster file read object by object, never whole: JSON (one object,
//! a `List`, or several concatenated), YAML (documents split on `---`
//! lines, as kubectl's reader splits them), either one gzipped. A
//! `List`'s items are handed out one at a time as the parser meets them,
//! so a dump of 150,000 pods is never one tree, nor one string. A long
//! read shows how far it is on stderr (a terminal only).

use std::fs::File;
use std::io::{BufRead, BufReader, Read};
use std::path::Path;

use indicatif::{ProgressBar, ProgressStyle};
use serde::de::{DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};

/// One object read: where it is (file, document, item), and its value.
pub type Found<'a> = &'a mut dyn FnMut(String, serde_yaml::Value);

/// Reads `path`, handing every object to `found`; `Err` is a document
/// that cannot be parsed (the file's later documents are not read).
pub fn read_objects(path: &Path, found: Found<'_>) -> Result<(), String> {
    let origin = path.display().to_string();
    let file = File::open(path).map_err(|e| format!("{origin}: {e}"))?;
    let size = file.metadata().map(|m| m.len()).unwrap_or(0);
    let bar = progress(size, &origin);
    let mut input = BufReader::with_capacity(1 << 16, bar.wrap_read(file));
    let gzipped = input.fill_buf().map_err(|e| format!("{origin}: {e}"))?.starts_with(&[0x1f, 0x8b]);
    let plain = path.to_string_lossy().trim_end_matches(".gz").to_string();
    let json = plain.ends_with(".json");
    let result = match gzipped {
        true => {
            let mut unzipped = BufReader::with_capacity(1 << 16, flate2::bufread::MultiGzDecoder::new(input));
            read_stream(&mut unzipped, json, &origin, found)
        }
        false => read_stream(&mut input, json, &origin, found),
    };
    bar.finish_and_clear();
    result
}

fn progress(size: u64, origin: &str) -> ProgressBar {
    // Small files are read before a bar could show.
    if size < 32 << 20 {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::new(size);
    let template = format!("reading {origin}: {{bar:30}} {{bytes}}/{{total_bytes}} {{elapsed}}");
    bar.set_style(ProgressStyle::with_template(&template).unwrap_or_else(|_| ProgressStyle::default_bar()));
    bar
}

fn read_stream(input: &mut dyn BufRead, json: bool, origin: &str, found: Found<'_>) -> Result<(), String> {
    match json {
        true => read_json(input, origin, found),
        false => read_yaml(input, origin, found),
    }
}

fn read_json(input: &mut dyn BufRead, origin: &str, found: Found<'_>) -> Result<(), String> {
    let mut de = serde_json::Deserializer::from_reader(input);
    for index in 1.. {
        let at = format!("{origin}: document {index}");
        let parsed = DocumentSeed { at: &at, found: &mut *found }.deserialize(&mut de);
        parsed.map_err(|e| format!("{at}: {}", deepest(e.to_string())))?;
        if de.end().is_ok() {
            return Ok(());
        }
    }
    Ok(())
}

fn read_yaml(input: &mut dyn BufRead, origin: &str, found: Found<'_>) -> Result<(), String> {
    let mut options = serde_saphyr::Options::default();
    let mut budget = serde_saphyr::Budget::default();
    // A dump of a large cluster is one document of millions of events:
    // its size is bounded by the disk it came from, not by these caps.
    budget.max_reader_input_bytes = None;
    budget.max_events = usize::MAX;
    budget.max_nodes = usize::MAX;
    budget.max_total_scalar_bytes = usize::MAX;
    options.budget = Some(budget);
    // A dump's lines can be megabytes long: the line and column say where.
    options.with_snippet = false;
    let mut documents = Documents { input, line: Vec::new(), pos: 0, ended: false, at_separator: false };
    for index in 1.. {
        let at = format!("{origin}: document {index}");
        if !documents.next_document().map_err(|e| format!("{at}: {e}"))? {
            return Ok(());
        }
        if documents.blank() {
            continue;
        }
        let seed = DocumentSeed { at: &at, found: &mut *found };
        serde_saphyr::with_deserializer_from_reader_with_options(&mut documents, options.clone(), |de| {
            seed.deserialize(de)
        })
        .map_err(|e| format!("{at}: {}", deepest(e.to_string())))?;
    }
    Ok(())
}

/// A parser's refusal of deep nesting, in the words the manifests' own
/// check uses.
fn deepest(error: String) -> String {
    let error = error.trim_start_matches("error: ").to_string();
    let too_deep = format!("nested more than {} levels deep; no manifest needs that", crate::nesting::MAX_NESTING);
    error.replace("recursion limit exceeded", &too_deep)
}

/// A YAML stream's documents, one at a time as a reader of its own: a
/// line starting `---` followed by nothing but a comment ends one.
struct Documents<'a> {
    input: &'a mut dyn BufRead,
    /// The current line, and how much of it was handed out.
    line: Vec<u8>,
    pos: usize,
    ended: bool,
    at_separator: bool,
}

impl Documents<'_> {
    /// Moves past a separator; false at the end of the stream.
    fn next_document(&mut self) -> std::io::Result<bool> {
        if self.ended {
            return Ok(false);
        }
        self.at_separator = false;
        self.fill_line()?;
        Ok(!self.ended || self.pos < self.line.len())
    }

    /// Whether the document holds nothing but blank lines and comments
    /// before its end (the first lines are buffered to tell).
    fn blank(&mut self) -> bool {
        let rest = &self.line[self.pos..];
        let empty = rest.iter().all(u8::is_ascii_whitespace) || rest.trim_ascii_start().starts_with(b"#");
        if empty && (self.at_separator || self.ended) {
            self.pos = self.line.len();
            return true;
        }
        false
    }

    /// The next line that belongs to the document, unless the document
    /// ended.
    fn fill_line(&mut self) -> std::io::Result<()> {
        while self.pos >= self.line.len() && !self.at_separator && !self.ended {
            self.line.clear();
            self.pos = 0;
            if self.input.read_until(b'\n', &mut self.line)? == 0 {
                self.ended = true;
            } else if is_separator(&self.line) {
                self.line.clear();
                self.at_separator = true;
            }
        }
        Ok(())
    }
}

fn is_separator(line: &[u8]) -> bool {
    let Some(rest) = line.strip_prefix(b"---") else { return false };
    let rest = rest.trim_ascii();
    rest.is_empty() || rest.starts_with(b"#")
}

impl Read for Documents<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        self.fill_line()?;
        let n = buf.len().min(self.line.len() - self.pos);
        buf[..n].copy_from_slice(&self.line[self.pos..self.pos + n]);
        self.pos += n;
        Ok(n)
    }
}

/// One document: a `List`'s items (any object with an `items` sequence)
/// handed out one by one, or else the object whole.
struct DocumentSeed<'a> {
    at: &'a str,
    found: &'a mut dyn FnMut(String, serde_yaml::Value),
}

impl<'de> DeserializeSeed<'de> for DocumentSeed<'_> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, de: D) -> Result<(), D::Error> {
        de.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for DocumentSeed<'_> {
    type Value = ();

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a Kubernetes object or a List of them")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let mut fields = serde_yaml::Mapping::new();
        let mut listed = false;
        while let Some(key) = map.next_key::<serde_yaml::Value>()? {
            if key.as_str() == Some("items") {
                map.next_value_seed(ItemsSeed { at: self.at, found: &mut *self.found })?;
                listed = true;
            } else {
                fields.insert(key, map.next_value()?);
            }
        }
        if !listed {
            (self.found)(self.at.to_string(), serde_yaml::Value::Mapping(fields));
        }
        Ok(())
    }

    /// An empty document.
    fn visit_unit<E>(self) -> Result<(), E> {
        Ok(())
    }

    fn visit_none<E>(self) -> Result<(), E> {
        Ok(())
    }
}

/// A `List`'s items, each handed out as the parser finishes it.
struct ItemsSeed<'a> {
    at: &'a str,
    found: &'a mut dyn FnMut(String, serde_yaml::Value),
}

impl<'de> DeserializeSeed<'de> for ItemsSeed<'_> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, de: D) -> Result<(), D::Error> {
        de.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for ItemsSeed<'_> {
    type Value = ();

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a sequence of Kubernetes objects")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        let mut index = 0;
        while let Some(item) = seq.next_element::<serde_yaml::Value>()? {
            index += 1;
            (self.found)(format!("{}, item {index}", self.at), item);
        }
        Ok(())
    }

    fn visit_unit<E>(self) -> Result<(), E> {
        Ok(())
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        // Not a List's items: nothing of it is an object to read.
        while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
        Ok(())
    }
}
