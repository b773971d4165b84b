//! The allocator's own account of the heap, for `/metrics`: the bytes
//! the program holds and the bytes freed but kept by the allocator. A
//! resident set that grows while the bytes held do not is the allocator's
//! fragmentation, not something the scheduler keeps (docs/benchmarks.md).

use std::fmt::Write as _;

/// Held and free bytes, where the allocator says (glibc).
pub fn usage() -> Option<(u64, u64)> {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        // SAFETY: mallinfo2 only reads the allocator's statistics (taking
        // each arena's lock); it has no preconditions.
        let info = unsafe { libc::mallinfo2() };
        let held = info.uordblks as u64 + info.hblkhd as u64;
        Some((held, info.fordblks as u64))
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    {
        None
    }
}

pub fn render(out: &mut String) {
    let Some((held, free)) = usage() else { return };
    let _ = writeln!(
        out,
        "# HELP wasmsched_heap_bytes The heap as the allocator accounts it: bytes held by the program (in_use), and freed but kept (free).\n# TYPE wasmsched_heap_bytes gauge\nwasmsched_heap_bytes{{state=\"in_use\"}} {held}\nwasmsched_heap_bytes{{state=\"free\"}} {free}"
    );
}

#[cfg(test)]
mod tests {
    #[test]
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    fn what_is_held_grows_with_what_is_allocated() {
        let (before, _) = super::usage().unwrap();
        // Zeroed: mapped, not touched. Other tests allocate meanwhile,
        // hence the margin.
        let block = vec![0u8; 128 << 20];
        let (during, _) = super::usage().unwrap();
        assert!(during >= before + (64 << 20), "{before} then {during}");
        drop(std::hint::black_box(block));
        let mut text = String::new();
        super::render(&mut text);
        assert!(text.contains("wasmsched_heap_bytes{state=\"in_use\"} "), "{text}");
    }
}
