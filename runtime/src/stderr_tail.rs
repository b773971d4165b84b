//! A policy's stderr as the host keeps it: the last bytes written, never
//! more, and never an error to the policy. wasmtime's `MemoryOutputPipe`
//! keeps the first bytes and traps the write that overflows it, so a
//! policy printing a little per node trapped every few dozen pods, and
//! its error then showed stale lines.

use std::collections::VecDeque;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use tokio::io::AsyncWrite;
use wasmtime_wasi::cli::{IsTerminal, StdoutStream};
use wasmtime_wasi_io::bytes::Bytes;
use wasmtime_wasi_io::poll::Pollable;
use wasmtime_wasi_io::streams::{OutputStream, StreamError};

#[derive(Clone)]
pub(crate) struct TailPipe {
    capacity: usize,
    buffer: Arc<Mutex<VecDeque<u8>>>,
}

impl TailPipe {
    pub fn new(capacity: usize) -> TailPipe {
        TailPipe { capacity, buffer: Arc::default() }
    }

    /// The last `capacity` bytes written.
    pub fn contents(&self) -> Vec<u8> {
        self.buffer.lock().map(|b| b.iter().copied().collect()).unwrap_or_default()
    }

    fn append(&self, bytes: &[u8]) {
        let Ok(mut buffer) = self.buffer.lock() else { return };
        let keep = &bytes[bytes.len().saturating_sub(self.capacity)..];
        let held = buffer.len();
        let overflow = (held + keep.len()).saturating_sub(self.capacity);
        buffer.drain(..overflow.min(held));
        buffer.extend(keep);
    }
}

#[wasmtime_wasi::async_trait]
impl OutputStream for TailPipe {
    fn write(&mut self, bytes: Bytes) -> Result<(), StreamError> {
        self.append(&bytes);
        Ok(())
    }

    fn flush(&mut self) -> Result<(), StreamError> {
        Ok(())
    }

    /// Always room: what does not fit pushes the oldest bytes out.
    fn check_write(&mut self) -> Result<usize, StreamError> {
        Ok(self.capacity.max(1))
    }
}

#[wasmtime_wasi::async_trait]
impl Pollable for TailPipe {
    async fn ready(&mut self) {}
}

impl AsyncWrite for TailPipe {
    fn poll_write(self: Pin<&mut Self>, _cx: &mut Context<'_>, buf: &[u8]) -> Poll<std::io::Result<usize>> {
        self.append(buf);
        Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

impl IsTerminal for TailPipe {
    fn is_terminal(&self) -> bool {
        false
    }
}

impl StdoutStream for TailPipe {
    fn p2_stream(&self) -> Box<dyn OutputStream> {
        Box::new(self.clone())
    }

    fn async_stream(&self) -> Box<dyn AsyncWrite + Send + Sync> {
        Box::new(self.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_last_bytes_are_kept_and_writing_never_fails() {
        let mut pipe = TailPipe::new(8);
        for chunk in ["line 1\n", "line 2\n", "line 3\n"] {
            assert!(pipe.check_write().unwrap() > 0);
            pipe.write(Bytes::from(chunk)).unwrap();
        }
        assert_eq!(pipe.contents(), b"\nline 3\n");
        pipe.write(Bytes::from(vec![b'x'; 100])).unwrap();
        assert_eq!(pipe.contents(), b"xxxxxxxx");
    }
}
