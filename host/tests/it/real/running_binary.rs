//! `wasmsched run` as an operator starts it, in a child process: its
//! `/readyz?verbose` and its log.

use std::io::{Read, Write};
use std::process::Command;

use std::time::{Duration, Instant};
use wasmsched_test_support::process::Guarded;

/// `wasmsched run` in a child process.
pub struct RunningBinary {
    /// Killed (with its compile workers) on drop, pass or panic.
    child: Guarded,
    port: u16,
    log: tempfile::NamedTempFile,
}

impl RunningBinary {
    pub fn new(child: Guarded, port: u16, log: tempfile::NamedTempFile) -> RunningBinary {
        RunningBinary { child, port, log }
    }

    /// Its process id (its `/proc` entry: memory).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The port of its endpoints (`/metrics` for a scraper).
    pub fn port(&self) -> u16 {
        self.port
    }

    fn readyz(&self) -> Option<(u16, String)> {
        self.get("/readyz?verbose")
    }

    /// One of its endpoints: status code and body.
    pub fn get(&self, path: &str) -> Option<(u16, String)> {
        let mut s = std::net::TcpStream::connect(("127.0.0.1", self.port)).ok()?;
        s.write_all(format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").as_bytes()).ok()?;
        let mut out = String::new();
        s.read_to_string(&mut out).ok()?;
        let code = out.split_whitespace().nth(1)?.parse().ok()?;
        Some((code, out.split_once("\r\n\r\n").map(|(_, b)| b.to_string()).unwrap_or_default()))
    }

    /// Polls `/readyz?verbose` until its body contains `text`.
    pub async fn wait_readyz_mentions(&self, text: &str) -> (u16, String) {
        let deadline = crate::common::hang_guard();
        loop {
            if let Some((code, body)) = self.readyz()
                && body.contains(text)
            {
                return (code, body);
            }
            assert!(
                Instant::now() < deadline,
                "/readyz never mentioned {text:?}: {:?}\n{}",
                self.readyz(),
                self.log_text()
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    fn log_text(&self) -> String {
        std::fs::read_to_string(self.log.path()).unwrap_or_default()
    }

    /// SIGTERM, as a rollout sends it: the exit status and the whole log.
    /// A process that never exits fails the test at the hang guard (and is
    /// killed), with its log.
    pub fn terminate(mut self) -> (std::process::ExitStatus, String) {
        let _ = Command::new("kill").arg("-TERM").arg(self.child.id().to_string()).status();
        let deadline = crate::common::hang_guard();
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return (status, self.log_text());
            }
            if Instant::now() > deadline {
                self.child.kill_all();
                panic!("still running after SIGTERM (hang guard):\n{}", self.log_text());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// SIGTERM, then the whole log.
    pub fn stop(mut self) -> String {
        let _ = Command::new("kill").arg("-TERM").arg(self.child.id().to_string()).status();
        let deadline = Instant::now() + Duration::from_secs(30);
        while self.child.try_wait().ok().flatten().is_none() {
            if Instant::now() > deadline {
                self.child.kill_all();
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        self.log_text()
    }
}
