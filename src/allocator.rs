//! The server's global allocator: small blocks from mimalloc, larger ones
//! from the system allocator (glibc's `malloc` on Linux).
//!
//! Why two: the request path (hyper's buffers, serde's strings, the
//! per-query candidate and answer vectors, tokio's tasks) allocates and
//! frees many small blocks, often on different threads, and mimalloc does
//! that with less work than glibc. But mimalloc rounds a block up to its size
//! class, and above 512 bytes the classes are 128 bytes and more apart
//! (four per doubling), while glibc rounds to 16 bytes. A document's
//! longest-lived block, its signature and shingles (`engine::record`:
//! 512 bytes of signature at 128 permutations, plus 4 per shingle), sits
//! just there. Measured on the 1M articles corpus (docs/benchmarks.md,
//! round 6): RSS growth 1,573 bytes per document with glibc alone, 1,720
//! with mimalloc alone, 1,547 with this split; with the split, the server's
//! CPU per `GET /similar` fell 15% and per ingested document 4–22%.
//!
//! The route is a pure function of the block's size, and `GlobalAlloc`'s
//! contract hands `dealloc` and `realloc` the layout the block was
//! allocated with, so every block goes back to the allocator it came from;
//! a `realloc` across the line moves the block. mimalloc is built without
//! transparent huge pages (the crate's `no_thp` feature): with them, fresh
//! ingests alternated between two speeds, the slow one spending a third of
//! its time zeroing 2 MiB pages in the kernel. The server collapses its
//! resident memory, mimalloc's and glibc's, into huge pages later, once it
//! is filled (`hugepages.rs`).
//!
//! Only the `neardup` binary installs it (`src/main.rs`); tests, benches and
//! examples run on Rust's default allocator.
#![allow(unsafe_code)]

use std::alloc::{GlobalAlloc, Layout, System};

use mimalloc::MiMalloc;

/// Blocks of more than this many bytes come from the system allocator.
pub const SMALL_MAX: usize = 512;

/// Small blocks from mimalloc, the rest from the system allocator (module docs).
#[derive(Debug, Default, Clone, Copy)]
pub struct SplitAlloc;

/// Whether a block of `size` bytes is mimalloc's.
#[inline]
fn is_small(size: usize) -> bool {
    size <= SMALL_MAX
}

// SAFETY: each method forwards to one of two allocators that implement
// `GlobalAlloc` soundly, chosen by `is_small(layout.size())`. The caller's
// contract gives `dealloc` and `realloc` the layout the block was allocated
// with, so a block is always freed or resized by the allocator that made
// it. When `realloc` crosses the line, the new block comes from `self.alloc`
// with the new size and the same (valid) alignment, `min(old, new)` bytes
// are copied between two distinct live blocks, and the old block is freed
// only once the copy is made; on failure the old block is left untouched
// and null returned, as `GlobalAlloc::realloc` requires.
unsafe impl GlobalAlloc for SplitAlloc {
    #[inline]
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract (non-zero size) passes through.
        unsafe {
            if is_small(layout.size()) {
                MiMalloc.alloc(layout)
            } else {
                System.alloc(layout)
            }
        }
    }

    #[inline]
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: as `alloc`.
        unsafe {
            if is_small(layout.size()) {
                MiMalloc.alloc_zeroed(layout)
            } else {
                System.alloc_zeroed(layout)
            }
        }
    }

    #[inline]
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `layout` is the block's own (caller's contract), so
        // `is_small` names the allocator that made it.
        unsafe {
            if is_small(layout.size()) {
                MiMalloc.dealloc(ptr, layout)
            } else {
                System.dealloc(ptr, layout)
            }
        }
    }

    #[inline]
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let (was_small, small) = (is_small(layout.size()), is_small(new_size));
        if was_small == small {
            // SAFETY: the block's own allocator, with the caller's contract.
            return unsafe {
                if small {
                    MiMalloc.realloc(ptr, layout, new_size)
                } else {
                    System.realloc(ptr, layout, new_size)
                }
            };
        }
        // SAFETY: the caller guarantees `new_size`, rounded up to
        // `layout.align()`, does not overflow `isize`: a valid layout.
        let new_layout = unsafe { Layout::from_size_align_unchecked(new_size, layout.align()) };
        // SAFETY: `new_size` is non-zero (caller's contract).
        let new = unsafe { self.alloc(new_layout) };
        if !new.is_null() {
            // SAFETY: `ptr` is live for `layout.size()` bytes, `new` for
            // `new_size`; they are distinct blocks, so they do not overlap.
            // `ptr` is then freed with its own layout.
            unsafe {
                std::ptr::copy_nonoverlapping(ptr, new, layout.size().min(new_size));
                self.dealloc(ptr, layout);
            }
        }
        new
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// A live block: where, its layout, and the byte it was filled with.
    struct Block {
        ptr: *mut u8,
        layout: Layout,
        fill: u8,
    }

    fn check(block: &Block) {
        assert_eq!(block.ptr as usize % block.layout.align(), 0, "misaligned");
        // SAFETY: `block.ptr` is live for `block.layout.size()` bytes.
        let bytes = unsafe { std::slice::from_raw_parts(block.ptr, block.layout.size()) };
        assert!(bytes.iter().all(|&b| b == block.fill), "contents lost");
    }

    fn fill(block: &Block) {
        // SAFETY: as `check`.
        unsafe { std::ptr::write_bytes(block.ptr, block.fill, block.layout.size()) };
    }

    /// Sizes around the line, tiny ones and large ones.
    fn size() -> impl Strategy<Value = usize> {
        prop_oneof![
            (SMALL_MAX - 8)..=(SMALL_MAX + 8),
            1usize..=64,
            1usize..=4096,
            (1usize << 16)..=(1usize << 18),
        ]
    }

    #[derive(Debug, Clone)]
    enum Op {
        Alloc {
            size: usize,
            align_log: u32,
            zeroed: bool,
        },
        Realloc {
            at: usize,
            size: usize,
        },
        Free {
            at: usize,
        },
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            (size(), 0u32..=12, any::<bool>()).prop_map(|(size, align_log, zeroed)| Op::Alloc {
                size,
                align_log,
                zeroed
            }),
            (any::<usize>(), size()).prop_map(|(at, size)| Op::Realloc { at, size }),
            any::<usize>().prop_map(|at| Op::Free { at }),
        ]
    }

    proptest! {
        /// Random allocations, resizes (many across the line, both ways) and
        /// frees keep every block's alignment and contents; a block freed
        /// to the wrong allocator aborts the test process (glibc's and
        /// mimalloc's checks), so routing mistakes fail here too.
        #[test]
        fn blocks_survive_alloc_realloc_free(ops in proptest::collection::vec(op(), 1..200)) {
            let a = SplitAlloc;
            let mut live: Vec<Block> = Vec::new();
            for (n, op) in ops.into_iter().enumerate() {
                let stamp = (n % 251) as u8 + 1;
                match op {
                    Op::Alloc { size, align_log, zeroed } => {
                        let layout = Layout::from_size_align(size, 1 << align_log).unwrap();
                        // SAFETY: non-zero size.
                        let ptr = unsafe { if zeroed { a.alloc_zeroed(layout) } else { a.alloc(layout) } };
                        prop_assert!(!ptr.is_null());
                        if zeroed {
                            check(&Block { ptr, layout, fill: 0 });
                        }
                        let block = Block { ptr, layout, fill: stamp };
                        fill(&block);
                        live.push(block);
                    }
                    Op::Realloc { at, size } if !live.is_empty() => {
                        let at = at % live.len();
                        let old = &live[at];
                        check(old);
                        // SAFETY: a live block with its own layout; non-zero size.
                        let ptr = unsafe { a.realloc(old.ptr, old.layout, size) };
                        prop_assert!(!ptr.is_null());
                        let kept = Block {
                            ptr,
                            layout: Layout::from_size_align(old.layout.size().min(size), old.layout.align()).unwrap(),
                            fill: old.fill,
                        };
                        check(&kept);
                        let block = Block {
                            ptr,
                            layout: Layout::from_size_align(size, old.layout.align()).unwrap(),
                            fill: stamp,
                        };
                        fill(&block);
                        live[at] = block;
                    }
                    Op::Free { at } if !live.is_empty() => {
                        let block = live.swap_remove(at % live.len());
                        check(&block);
                        // SAFETY: a live block with its own layout.
                        unsafe { a.dealloc(block.ptr, block.layout) };
                    }
                    _ => {}
                }
            }
            for block in live {
                check(&block);
                // SAFETY: as above.
                unsafe { a.dealloc(block.ptr, block.layout) };
            }
        }
    }
}
