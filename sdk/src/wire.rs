//! The contract's packed columns (0.3 on: little-endian bytes) to and from
//! the numbers policies read: one call's candidates as [`Candidates`],
//! each column read in place from the bytes the host wrote (decoded only
//! when they are not aligned for their numbers), and the answers packed on
//! the way out.

use std::fmt;
use std::ops::Deref;

use crate::bindings::wasmsched::policy::types as wit;

/// One call's candidates as columns of numbers, one entry per candidate in
/// each: the node ids and what is already placed on each node. Each column
/// reads as a slice (`&usage.requested_memory`, `column[i]`, `.iter()`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Candidates {
    pub nodes: Column<u32>,
    pub requested_milli_cpu: Column<u64>,
    pub requested_memory: Column<u64>,
    pub requested_ephemeral_storage: Column<u64>,
    /// The same sums with kube-scheduler's scoring defaults for pods that
    /// request nothing (100m cpu, 200 MB memory).
    pub nonzero_requested_milli_cpu: Column<u64>,
    pub nonzero_requested_memory: Column<u64>,
    pub pod_count: Column<u32>,
}

impl Candidates {
    /// The host's packed columns, taken over; an error names a column that
    /// is not a whole number of entries.
    pub fn from_wire(c: wit::Candidates) -> Result<Self, String> {
        Ok(Candidates {
            nodes: Column::from_wire(c.nodes, "nodes")?,
            requested_milli_cpu: Column::from_wire(c.requested_milli_cpu, "requested-milli-cpu")?,
            requested_memory: Column::from_wire(c.requested_memory, "requested-memory")?,
            requested_ephemeral_storage: Column::from_wire(
                c.requested_ephemeral_storage,
                "requested-ephemeral-storage",
            )?,
            nonzero_requested_milli_cpu: Column::from_wire(
                c.nonzero_requested_milli_cpu,
                "nonzero-requested-milli-cpu",
            )?,
            nonzero_requested_memory: Column::from_wire(c.nonzero_requested_memory, "nonzero-requested-memory")?,
            pod_count: Column::from_wire(c.pod_count, "pod-count")?,
        })
    }
}

/// A number the contract packs: u32, u64 or f64, little-endian on the
/// wire. Each has no padding, so its bytes may be read as they lie.
pub trait Word: Copy + fmt::Debug + PartialEq + private::Sealed {
    #[doc(hidden)]
    const SIZE: usize;
    #[doc(hidden)]
    fn from_le(bytes: &[u8]) -> Self;
    #[doc(hidden)]
    fn push_le(self, out: &mut Vec<u8>);
}

mod private {
    pub trait Sealed {}
    impl Sealed for u32 {}
    impl Sealed for u64 {}
    impl Sealed for f64 {}
}

macro_rules! word {
    ($($t:ty),*) => {$(
        impl Word for $t {
            const SIZE: usize = std::mem::size_of::<$t>();
            fn from_le(bytes: &[u8]) -> Self {
                <$t>::from_le_bytes(bytes.try_into().expect("chunks of SIZE bytes"))
            }
            fn push_le(self, out: &mut Vec<u8>) {
                out.extend_from_slice(&self.to_le_bytes());
            }
        }
    )*};
}
word!(u32, u64, f64);

/// One column of numbers; dereferences to `[T]`. Built from the host's
/// bytes it reads them in place: the numbers are never copied, as lists of
/// numbers were not before contract 0.3 packed them (a decoding pass cost
/// the SDK a tenth more instructions per attempt, docs/benchmarks.md).
#[derive(Clone)]
pub struct Column<T: Word> {
    repr: Repr<T>,
}

#[derive(Clone)]
enum Repr<T> {
    /// Little-endian bytes at an address aligned for `T`, a whole number
    /// of `T`s, at least one: read as `[T]` where they are.
    InPlace(Vec<u8>),
    /// Numbers decoded from bytes that were not (or on a big-endian
    /// machine), or given as numbers.
    Values(Vec<T>),
}

impl<T: Word> Column<T> {
    fn from_wire(bytes: Vec<u8>, column: &str) -> Result<Self, String> {
        if !bytes.len().is_multiple_of(T::SIZE) {
            return Err(format!(
                "candidate column {column} is {} bytes, not a whole number of {}-byte entries",
                bytes.len(),
                T::SIZE
            ));
        }
        let in_place = cfg!(target_endian = "little") && !bytes.is_empty() && bytes.as_ptr().cast::<T>().is_aligned();
        let repr = if in_place { Repr::InPlace(bytes) } else { Repr::Values(decoded(&bytes)) };
        Ok(Column { repr })
    }
}

/// Little-endian bytes, a whole number of `T`s, as numbers.
fn decoded<T: Word>(bytes: &[u8]) -> Vec<T> {
    bytes.chunks_exact(T::SIZE).map(T::from_le).collect()
}

impl<T: Word> Deref for Column<T> {
    type Target = [T];
    fn deref(&self) -> &[T] {
        match &self.repr {
            Repr::Values(values) => values,
            // SAFETY: `from_wire` keeps bytes in place only when they are
            // non-empty (so the pointer is the allocation's, not a dangling
            // one), aligned for `T` and a whole number of `T`s, on a
            // little-endian machine; any bit pattern is a valid u32 or
            // u64; the vector is never changed, so its buffer stays put.
            Repr::InPlace(bytes) => unsafe {
                std::slice::from_raw_parts(bytes.as_ptr().cast::<T>(), bytes.len() / T::SIZE)
            },
        }
    }
}

impl<T: Word> From<Vec<T>> for Column<T> {
    fn from(values: Vec<T>) -> Self {
        Column { repr: Repr::Values(values) }
    }
}

impl<T: Word> FromIterator<T> for Column<T> {
    fn from_iter<I: IntoIterator<Item = T>>(values: I) -> Self {
        values.into_iter().collect::<Vec<T>>().into()
    }
}

impl<T: Word> Default for Column<T> {
    fn default() -> Self {
        Vec::new().into()
    }
}

impl<T: Word> fmt::Debug for Column<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

impl<T: Word> PartialEq for Column<T> {
    fn eq(&self, other: &Self) -> bool {
        **self == **other
    }
}

impl<T: Word + Eq> Eq for Column<T> {}

/// u32s, u64s or f64s, packed little-endian as the contract carries them:
/// on a little-endian machine (wasm), one copy of their bytes, not a push
/// per number (which cost the SDK ~20 instructions a score).
pub fn pack<T: Word>(values: &[T]) -> Vec<u8> {
    if cfg!(target_endian = "little") {
        // SAFETY: u32, u64 and f64 have no padding, so every byte of the
        // slice is initialised and may be read as a u8; on a little-endian
        // machine those bytes are the contract's.
        unsafe { std::slice::from_raw_parts(values.as_ptr().cast::<u8>(), std::mem::size_of_val(values)) }.to_vec()
    } else {
        let mut bytes = Vec::with_capacity(std::mem::size_of_val(values));
        values.iter().for_each(|v| v.push_le(&mut bytes));
        bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wire() -> wit::Candidates {
        wit::Candidates {
            nodes: pack(&[3u32, 9]),
            requested_milli_cpu: pack(&[100u64, 2_000]),
            requested_memory: pack(&[1u64 << 33, 0]),
            requested_ephemeral_storage: pack(&[0u64, 0]),
            nonzero_requested_milli_cpu: pack(&[100u64, 2_000]),
            nonzero_requested_memory: pack(&[1u64 << 33, 200]),
            pod_count: pack(&[1u32, 4]),
        }
    }

    #[test]
    fn packed_columns_read_as_numbers_and_a_torn_one_is_named() {
        let c = Candidates::from_wire(wire()).unwrap();
        assert_eq!(*c.nodes, [3, 9]);
        assert_eq!(*c.requested_memory, [1 << 33, 0]);
        assert_eq!(c.nonzero_requested_memory[1], 200);
        assert_eq!(*c.pod_count, [1, 4]);
        assert_eq!(c.nodes, Column::from(vec![3, 9]), "read in place or given, the same column");
        let torn = wit::Candidates { pod_count: vec![1, 0, 0], ..wire() };
        assert_eq!(
            Candidates::from_wire(torn).unwrap_err(),
            "candidate column pod-count is 3 bytes, not a whole number of 4-byte entries"
        );
        let empty = wit::Candidates { nodes: vec![], ..wire() };
        assert!(Candidates::from_wire(empty).unwrap().nodes.is_empty());
    }

    #[test]
    fn packed_numbers_are_their_little_endian_bytes() {
        assert_eq!(pack(&[1u32, 0x0102_0304]), [1, 0, 0, 0, 4, 3, 2, 1]);
        assert_eq!(pack(&[1.5f64]), 1.5f64.to_le_bytes());
        assert!(pack::<u64>(&[]).is_empty());
    }

    /// Bytes at any address decode to the numbers read in place.
    #[test]
    fn bytes_at_an_unaligned_address_decode_to_the_same_numbers() {
        let numbers = [7u64, 1 << 40, u64::MAX];
        let mut buffer = [0u8; 25];
        buffer[1..].copy_from_slice(&pack(&numbers));
        assert_eq!(decoded::<u64>(&buffer[1..]), numbers);
        let column = Column::<u64>::from_wire(buffer[1..].to_vec(), "x").unwrap();
        assert_eq!(*column, numbers);
    }
}
