//! The sort and deduplication of a document's shingle hashes (`u32`s) in
//! vector registers, with intrinsics, where the running CPU has them. Not
//! text: the values are any `u32`s; its callers are `text::shingle`
//! (`sort_hashes` and the dedup after it), which falls back to the
//! standard library's sorts and `Vec::dedup` wherever these decline, and
//! the containment pair scan ([`sort_short`]).
//!
//! - [`network`]: [`sort_network`], the sort of a document's shingle
//!   hashes as a bitonic sorting network in vector registers: up to 256 of
//!   them in AVX-512 registers, or up to 128 in AVX2 registers on CPUs
//!   without AVX-512 (AMD Zen 2 and 3, Intel's client CPUs).
//! - [`scatter`]: [`scatter_buckets`], the AVX-512 bucket pass that splits
//!   more hashes than one network takes by their top bits, each bucket then
//!   sorted by the network.
//! - [`dedup`]: [`dedup_sorted`], the removal of repeats after the sort, 16
//!   values a step with AVX-512.
//!
//! **Safety.** The three submodules allow `unsafe` (for calling
//! `#[target_feature]` functions, and for intrinsics' loads and stores:
//! unaligned whole-register ones in the AVX2 network, masked ones in the
//! AVX-512 network, the dedup and the scatter); each function's argument is
//! in its docs ([`sort_network`], [`dedup_sorted`], [`scatter_buckets`]).
//! This file only detects features and names the functions.

/// `$body` 16 times, with `$i` a constant 0, 1, …, 15 in each copy: the
/// networks' loops over registers written out, so that every register
/// index is a constant and the registers stay registers (LLVM left such
/// loops rolled for 8 and 16 registers, the array on the stack between
/// the levels). A copy whose condition on `$i` is false folds away.
macro_rules! unroll16 {
    ($i:ident => $body:expr) => {{
        unroll16!(@ $i => $body; 0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15)
    }};
    (@ $i:ident => $body:expr; $($n:literal)*) => {{
        $({
            const $i: usize = $n;
            $body;
        })*
    }};
}

mod dedup;
mod network;
mod scatter;

pub(crate) use dedup::dedup_sorted;

/// Sort a short slice of `u32`s: two by one comparison, up to
/// [`network_max`] in vector registers ([`sort_network`]), others (and
/// on CPUs without the registers) by the standard library's sort. For
/// callers whose slices are mostly short: the containment pair scan's
/// lists and each document's parts of them (`engine::postings`,
/// `engine::dedup`).
pub(crate) fn sort_short(v: &mut [u32]) {
    match v {
        [a, b] => {
            if a > b {
                std::mem::swap(a, b);
            }
        }
        _ => {
            if !sort_network(v) {
                v.sort_unstable();
            }
        }
    }
}
pub(crate) use network::{network_max, sort_network};
pub(crate) use scatter::{scatter_available, scatter_buckets, SCATTER_BUCKETS_MAX, SCATTER_STRIDE};

/// Whether the running CPU has AVX2 (cached by the standard library).
#[cfg(target_arch = "x86_64")]
#[inline]
fn has_avx2() -> bool {
    std::arch::is_x86_feature_detected!("avx2")
}

/// Whether the running CPU has AVX-512 F (cached by the standard library).
#[cfg(target_arch = "x86_64")]
#[inline]
fn has_avx512f() -> bool {
    std::arch::is_x86_feature_detected!("avx512f")
}

#[cfg(test)]
mod tests {
    /// `sort_short` sorts every length: two by hand, then the network's
    /// lengths, then past them.
    #[test]
    fn sort_short_sorts_every_length() {
        let mut state = 5u64;
        for n in 0..=super::network::NETWORK_MAX + 40 {
            let v: Vec<u32> = (0..n)
                .map(|_| crate::minhash::splitmix64(&mut state) as u32 % 1000)
                .collect();
            let (mut got, mut want) = (v.clone(), v);
            want.sort_unstable();
            super::sort_short(&mut got);
            assert_eq!(got, want, "n = {n}");
        }
    }
}
