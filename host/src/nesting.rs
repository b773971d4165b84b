//! A cheap look at how deeply a YAML (or JSON) text nests, before a
//! parser sees it. libyaml's scanner, under serde_yaml, spends time in the
//! square of the flow nesting depth before serde's recursion limit refuses
//! the document: 100,000 `[` took over a minute. Real manifests and
//! settings nest a few levels; anything deeper than `MAX_NESTING` is
//! refused here, in one pass, with its line.
//!
//! The scan follows YAML's structure only as far as it must: flow
//! collections (`[`, `{`) opened where a node may start, quoted scalars,
//! comments, block scalars (`|`, `>`) and chains of block sequence entries
//! on one line (`- - - x`). Brackets inside plain or quoted scalars, or in a
//! block scalar's text, do not count.

/// Deeper than this is refused.
pub const MAX_NESTING: usize = 64;

pub fn check_nesting(text: &str) -> Result<(), String> {
    let mut scan = Scan { bytes: text.as_bytes(), i: 0, line: 1, flow: 0, node_may_start: true, chain: 0 };
    scan.run()
}

struct Scan<'a> {
    bytes: &'a [u8],
    i: usize,
    line: usize,
    /// Open flow collections.
    flow: usize,
    /// Where a node may start: a flow collection opened here nests.
    node_may_start: bool,
    /// Block sequence entries begun on this line.
    chain: usize,
}

impl Scan<'_> {
    fn at(&self, i: usize) -> u8 {
        self.bytes.get(i).copied().unwrap_or(b'\n')
    }

    fn too_deep(&self) -> Result<(), String> {
        Err(format!(
            "line {}: nested more than {MAX_NESTING} levels deep; no manifest or setting needs that",
            self.line
        ))
    }

    fn run(&mut self) -> Result<(), String> {
        while self.i < self.bytes.len() {
            let b = self.bytes[self.i];
            let spaced_after = matches!(self.at(self.i + 1), b' ' | b'\t' | b'\n' | b'\r');
            let spaced_before = self.i == 0 || matches!(self.at(self.i - 1), b' ' | b'\t' | b'\n' | b'\r');
            match b {
                b'\n' => {
                    self.line += 1;
                    self.node_may_start = true;
                    self.chain = 0;
                }
                b' ' | b'\t' | b'\r' => {}
                b'#' if spaced_before => self.skip_line(),
                b'"' | b'\'' if self.node_may_start => {
                    self.skip_quoted(b);
                    self.node_may_start = false;
                }
                b'[' | b'{' if self.node_may_start => {
                    self.flow += 1;
                    if self.flow > MAX_NESTING {
                        return self.too_deep();
                    }
                }
                b']' | b'}' if self.flow > 0 => {
                    self.flow -= 1;
                    self.node_may_start = false;
                }
                b',' if self.flow > 0 => self.node_may_start = true,
                b':' if spaced_after || self.flow > 0 => self.node_may_start = true,
                b'-' | b'?' if self.node_may_start && spaced_after => {
                    self.chain += 1;
                    if self.chain > MAX_NESTING {
                        return self.too_deep();
                    }
                }
                b'|' | b'>' if self.node_may_start && self.flow == 0 => self.skip_block_scalar(),
                _ => self.node_may_start = false,
            }
            self.i += 1;
        }
        Ok(())
    }

    /// To the end of the line (the newline is the caller's).
    fn skip_line(&mut self) {
        while self.i + 1 < self.bytes.len() && self.bytes[self.i + 1] != b'\n' {
            self.i += 1;
        }
    }

    /// Past a quoted scalar, its escapes (`\"`) and doubled quotes (`''`)
    /// included; it may span lines.
    fn skip_quoted(&mut self, quote: u8) {
        self.i += 1;
        while self.i < self.bytes.len() {
            match self.bytes[self.i] {
                b'\\' if quote == b'"' => self.i += 1,
                b'\'' if quote == b'\'' && self.at(self.i + 1) == b'\'' => self.i += 1,
                b'\n' => self.line += 1,
                c if c == quote => return,
                _ => {}
            }
            self.i += 1;
        }
    }

    /// Past a block scalar's text: the lines after its indicator that are
    /// indented deeper than the line it began on, and blank lines.
    fn skip_block_scalar(&mut self) {
        let line_start = self.bytes[..self.i].iter().rposition(|&c| c == b'\n').map_or(0, |p| p + 1);
        let parent = self.bytes[line_start..].iter().take_while(|&&c| c == b' ').count();
        self.skip_line();
        loop {
            let next = self.i + 2;
            if next > self.bytes.len() {
                return;
            }
            let rest = &self.bytes[next..];
            let indent = rest.iter().take_while(|&&c| c == b' ').count();
            let blank = matches!(rest.get(indent), None | Some(b'\n') | Some(b'\r'));
            if !blank && indent <= parent {
                return;
            }
            self.i += 1;
            self.line += 1;
            self.skip_line();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn real_documents_pass() {
        let manifest = r#"
apiVersion: v1
kind: Pod
metadata: {name: web, labels: {app: "a[1]", tier: 'b{'}}  # a comment with [[[[
spec:
  containers:
  - name: c
    command: ["sh", "-c", "echo [ ]"]
    args:
    - |
      [ -f /x ] && echo [[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[
      {{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{
    env: [{name: A, value: "x]"}]
  nodeSelector: {zone: a}
"#;
        check_nesting(manifest).unwrap();
        check_nesting(r#"{"kind": "Pod", "spec": {"containers": [{"name": "c", "args": ["[[["]}]}}"#).unwrap();
        check_nesting("- - - - x\n").unwrap();
    }

    #[test]
    fn deep_nesting_is_refused_with_its_line() {
        let deep = format!("kind: Pod\nspec: {{containers: {}{}}}\n", "[".repeat(100_000), "]".repeat(100_000));
        let e = check_nesting(&deep).unwrap_err();
        assert!(e.starts_with("line 2: nested more than 64 levels deep"), "{e}");
        let json = format!("{{\"a\":{}1{}}}", "{\"b\":".repeat(100), "}".repeat(100));
        assert!(check_nesting(&json).is_err());
        let dashes = format!("key:\n{}x\n", "- ".repeat(1000));
        assert!(check_nesting(&dashes).unwrap_err().starts_with("line 2:"));
    }
}
