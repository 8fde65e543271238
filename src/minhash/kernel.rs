//! The signing loop, in register-blocked form, compiled once per instruction
//! set and picked at run time.
//!
//! **Why blocked.** The plain loop (`for x in shingles { for i in 0..num_perm
//! { sig[i] = min(sig[i], (x ^ b[i]) * a[i]) } }`) loads `a[i]`, `b[i]` and
//! `sig[i]` and stores `sig[i]` for every shingle: memory traffic, not
//! arithmetic, bounds it. Here the permutations are cut into blocks of `B`
//! slots whose constants and running minima stay in vector registers while
//! every shingle of the document streams past; each (shingle, 8 slots) step
//! is one xor, one 32-bit multiply and one unsigned min, with no memory access
//! but the broadcast of `x`. `B` is sized to the register file: 16 slots in
//! 12 of the 16 SSE registers, 32 in 12 of the 16 AVX2 registers, 128 in 24
//! of the 32 AVX-512 registers (one pass over the shingles for the default
//! 128 permutations). The code is plain Rust on fixed-size arrays; LLVM
//! vectorizes it. Slots past the last whole block take the plain loop.
//!
//! **Why runtime dispatch.** The crate's baseline is x86-64-v2 (SSE4.1:
//! 4 lanes). AVX2 (8 lanes) and AVX-512 (16 lanes) are common on servers but
//! not universal, so the same generic code is also compiled inside
//! `#[target_feature]` functions and chosen by `is_x86_feature_detected!`
//! when the [`MinHasher`](super::MinHasher) is built. Calling a
//! `#[target_feature]` function is `unsafe` (running it on a CPU without the
//! feature is undefined behaviour); this module is the only place in the
//! crate that allows `unsafe`, and it is sound because a [`Kernel`] naming an
//! instruction set can only be obtained from a successful detection.
//!
//! Every kernel computes the same function exactly (integer arithmetic, no
//! reassociation issues: `min` is associative and commutative); the tests
//! compare each available kernel with a scalar reference for every
//! `num_perm` from 1 to 300.
#![allow(unsafe_code)]

/// An instruction set the signing loop was compiled for. Values other than
/// `Portable` exist only if the running CPU supports them (the variants'
/// fields are private to this module, so they cannot be built elsewhere).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Kernel(Isa);

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Isa {
    /// The build's baseline (SSE4.1 on the configured x86-64-v2).
    Portable,
    #[cfg(target_arch = "x86_64")]
    Avx2,
    #[cfg(target_arch = "x86_64")]
    Avx512,
}

impl Kernel {
    /// The widest kernel the running CPU supports.
    pub fn detect() -> Self {
        *Self::available()
            .last()
            .expect("the portable kernel always exists")
    }

    /// Every kernel the running CPU supports, narrowest first.
    pub fn available() -> Vec<Self> {
        #[allow(unused_mut)]
        let mut v = vec![Kernel(Isa::Portable)];
        #[cfg(target_arch = "x86_64")]
        {
            if std::arch::is_x86_feature_detected!("avx2") {
                v.push(Kernel(Isa::Avx2));
            }
            if std::arch::is_x86_feature_detected!("avx512f") {
                v.push(Kernel(Isa::Avx512));
            }
        }
        v
    }

    /// A short name for reports ("portable", "avx2", "avx512").
    pub fn name(self) -> &'static str {
        match self.0 {
            Isa::Portable => "portable",
            #[cfg(target_arch = "x86_64")]
            Isa::Avx2 => "avx2",
            #[cfg(target_arch = "x86_64")]
            Isa::Avx512 => "avx512",
        }
    }

    /// Overwrite `sig` with the minima of `(x ^ b[i]) * a[i]` over `shingles`
    /// (`u32::MAX` if there are none). `a`, `b` and `sig` have equal lengths.
    pub fn sign(self, a: &[u32], b: &[u32], shingles: &[u32], sig: &mut [u32]) {
        assert!(a.len() == sig.len() && b.len() == sig.len());
        match self.0 {
            Isa::Portable => blocked::<16>(a, b, shingles, sig),
            // SAFETY: `Kernel(Isa::Avx2)` is only constructed in `available`
            // after `is_x86_feature_detected!("avx2")` returned true.
            #[cfg(target_arch = "x86_64")]
            Isa::Avx2 => unsafe { avx2(a, b, shingles, sig) },
            // SAFETY: `Kernel(Isa::Avx512)` is only constructed in `available`
            // after `is_x86_feature_detected!("avx512f")` returned true.
            #[cfg(target_arch = "x86_64")]
            Isa::Avx512 => unsafe { avx512(a, b, shingles, sig) },
        }
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn avx2(a: &[u32], b: &[u32], shingles: &[u32], sig: &mut [u32]) {
    blocked::<32>(a, b, shingles, sig)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
fn avx512(a: &[u32], b: &[u32], shingles: &[u32], sig: &mut [u32]) {
    blocked::<128>(a, b, shingles, sig)
}

/// Whole blocks of `B` slots with constants and minima held in registers,
/// then the remaining slots with the plain loop. Inlined into each
/// `#[target_feature]` caller so that it is compiled for that instruction set.
#[inline(always)]
fn blocked<const B: usize>(a: &[u32], b: &[u32], shingles: &[u32], sig: &mut [u32]) {
    let mut a_blocks = a.chunks_exact(B);
    let mut b_blocks = b.chunks_exact(B);
    let mut sig_blocks = sig.chunks_exact_mut(B);
    for ((ab, bb), sb) in (&mut a_blocks).zip(&mut b_blocks).zip(&mut sig_blocks) {
        let ab: &[u32; B] = ab.try_into().expect("chunks_exact yields B slots");
        let bb: &[u32; B] = bb.try_into().expect("chunks_exact yields B slots");
        let (ab, bb) = (*ab, *bb);
        let mut m = [u32::MAX; B];
        for &x in shingles {
            for i in 0..B {
                m[i] = m[i].min((x ^ bb[i]).wrapping_mul(ab[i]));
            }
        }
        sb.copy_from_slice(&m);
    }
    plain(
        a_blocks.remainder(),
        b_blocks.remainder(),
        shingles,
        sig_blocks.into_remainder(),
    );
}

/// One pass over the slots per shingle, minima kept in `sig`.
#[inline(always)]
fn plain(a: &[u32], b: &[u32], shingles: &[u32], sig: &mut [u32]) {
    sig.fill(u32::MAX);
    for &x in shingles {
        for ((s, &a), &b) in sig.iter_mut().zip(a).zip(b) {
            *s = (*s).min((x ^ b).wrapping_mul(a));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn reference(a: &[u32], b: &[u32], shingles: &[u32]) -> Vec<u32> {
        a.iter()
            .zip(b)
            .map(|(&a, &b)| {
                shingles
                    .iter()
                    .map(|&x| (x ^ b).wrapping_mul(a))
                    .min()
                    .unwrap_or(u32::MAX)
            })
            .collect()
    }

    #[test]
    fn the_portable_kernel_is_always_available_and_detect_picks_the_widest() {
        let all = Kernel::available();
        assert_eq!(all[0].name(), "portable");
        assert_eq!(Kernel::detect(), *all.last().unwrap());
    }

    #[test]
    fn every_kernel_matches_the_reference_for_every_num_perm_up_to_300() {
        let mut state = 11u64;
        let mut next = || super::super::splitmix64(&mut state) as u32;
        let shingles: Vec<u32> = (0..77).map(|_| next()).collect();
        for n in 1..=300 {
            let a: Vec<u32> = (0..n).map(|_| next() | 1).collect();
            let b: Vec<u32> = (0..n).map(|_| next()).collect();
            let want = reference(&a, &b, &shingles);
            for k in Kernel::available() {
                let mut sig = vec![7u32; n];
                k.sign(&a, &b, &shingles, &mut sig);
                assert_eq!(sig, want, "{} num_perm={n}", k.name());
            }
        }
    }

    #[test]
    fn no_shingles_leaves_every_slot_at_max() {
        for k in Kernel::available() {
            let mut sig = vec![0u32; 40];
            k.sign(&[1; 40], &[0; 40], &[], &mut sig);
            assert!(sig.iter().all(|&s| s == u32::MAX), "{}", k.name());
        }
    }

    proptest! {
        #[test]
        fn every_kernel_equals_the_scalar_reference(
            ab in proptest::collection::vec((any::<u32>(), any::<u32>()), 1..300),
            shingles in proptest::collection::vec(any::<u32>(), 0..300),
        ) {
            let a: Vec<u32> = ab.iter().map(|&(a, _)| a | 1).collect();
            let b: Vec<u32> = ab.iter().map(|&(_, b)| b).collect();
            let want = reference(&a, &b, &shingles);
            for k in Kernel::available() {
                let mut sig = vec![0u32; a.len()];
                k.sign(&a, &b, &shingles, &mut sig);
                prop_assert_eq!(&sig, &want, "{}", k.name());
            }
        }
    }
}
