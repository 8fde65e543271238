//! MinHash signatures: `num_perm` 32-bit minima per document.
//!
//! **Permutation family.** Slot i maps a shingle hash x (already a uniform
//! 32-bit XXH3 value) through `π_i(x) = (x ⊕ bᵢ) · aᵢ mod 2³²` with aᵢ odd, a
//! bijection of u32, and keeps the minimum. The constants (aᵢ, bᵢ) come from
//! SplitMix64 seeded with `index.seed`, so a seed fixes every signature on
//! every machine. All arithmetic is 32-bit, so the loop vectorizes with
//! 32-bit lane multiply and unsigned min: the `kernel` module holds it in
//! register-blocked form, compiled for the x86-64-v2 baseline (SSE4.1, 4
//! lanes), AVX2 (8) and AVX-512 (16), and picks the widest the CPU has when
//! the hasher is built. Because inputs are already hashed by a
//! strong seeded hash, a cheap multiplicative permutation suffices; the
//! estimator's bias and variance are checked statistically in the tests below.
//!
//! The stored signature is "lean": the engine keeps one seed and each
//! document keeps only its `num_perm` values. The estimate of Jaccard
//! similarity is the fraction of equal slots.

mod kernel;

pub use kernel::Kernel;

/// The seeded permutation family and the signing routine.
#[derive(Clone, Debug)]
pub struct MinHasher {
    seed: u64,
    a: Box<[u32]>,
    b: Box<[u32]>,
    /// The instruction set the signing loop runs with (detected once here,
    /// not per call).
    kernel: Kernel,
}

/// SplitMix64: a tiny, well-specified generator for deriving constants.
pub(crate) fn splitmix64(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Salt separating the permutation constants from other seed-derived streams.
const PERMUTATION_SALT: u64 = 0x6d69_6e68_6173_6821;

impl MinHasher {
    pub fn new(num_perm: usize, seed: u64) -> Self {
        assert!(num_perm > 0, "num_perm must be positive");
        let mut state = seed ^ PERMUTATION_SALT;
        let mut a = Vec::with_capacity(num_perm);
        let mut b = Vec::with_capacity(num_perm);
        for _ in 0..num_perm {
            let r = splitmix64(&mut state);
            a.push((r as u32) | 1);
            b.push((r >> 32) as u32);
        }
        Self {
            seed,
            a: a.into(),
            b: b.into(),
            kernel: Kernel::detect(),
        }
    }

    /// The same hasher signing with `kernel` instead of the detected one
    /// (benchmarks and tests compare kernels; results are identical).
    pub fn with_kernel(mut self, kernel: Kernel) -> Self {
        self.kernel = kernel;
        self
    }

    pub fn kernel(&self) -> Kernel {
        self.kernel
    }

    pub fn num_perm(&self) -> usize {
        self.a.len()
    }

    pub fn seed(&self) -> u64 {
        self.seed
    }

    /// Sign a shingle set into a new signature.
    pub fn sign(&self, shingles: &[u32]) -> Box<[u32]> {
        let mut sig = vec![u32::MAX; self.num_perm()].into_boxed_slice();
        self.sign_into(shingles, &mut sig);
        sig
    }

    /// Sign into `sig` (length `num_perm`), which is overwritten.
    pub fn sign_into(&self, shingles: &[u32], sig: &mut [u32]) {
        assert_eq!(sig.len(), self.num_perm());
        self.kernel.sign(&self.a, &self.b, shingles, sig);
    }
}

/// Fraction of equal slots: the MinHash estimate of Jaccard similarity.
pub fn estimate(a: &[u32], b: &[u32]) -> f64 {
    debug_assert_eq!(a.len(), b.len());
    if a.is_empty() {
        return 0.0;
    }
    let equal = a.iter().zip(b).filter(|(x, y)| x == y).count();
    equal as f64 / a.len() as f64
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{rngs::StdRng, Rng, SeedableRng};

    #[test]
    fn signatures_are_deterministic_for_a_seed() {
        let set = [1u32, 5, 99, 1 << 31];
        assert_eq!(
            MinHasher::new(64, 1).sign(&set),
            MinHasher::new(64, 1).sign(&set)
        );
        assert_ne!(
            MinHasher::new(64, 1).sign(&set),
            MinHasher::new(64, 2).sign(&set)
        );
    }

    #[test]
    fn permutation_constants_are_stable_across_releases() {
        // Persisted signatures depend on these: changing them is a format change.
        let m = MinHasher::new(2, 1);
        let mut state = 1 ^ PERMUTATION_SALT;
        let r = splitmix64(&mut state);
        assert_eq!(m.a[0], (r as u32) | 1);
        let mut s = 0u64;
        assert_eq!(splitmix64(&mut s), 0xe220_a839_7b1d_cdaf);
    }

    #[test]
    fn identical_sets_have_identical_signatures_and_estimate_one() {
        let m = MinHasher::new(128, 42);
        let s = m.sign(&[3, 4, 5]);
        assert_eq!(estimate(&s, &s), 1.0);
    }

    #[test]
    fn estimate_is_unbiased_with_binomial_variance() {
        // Pairs of random sets with known Jaccard J = 1/3, 0.6 and 0.8; over many
        // pairs the mean estimate must be close to J and the variance close to
        // J(1-J)/num_perm, as for truly random permutations.
        let m = MinHasher::new(128, 9);
        let mut rng = StdRng::seed_from_u64(5);
        for (shared, each) in [(50usize, 50usize), (150, 50), (400, 50)] {
            let j = shared as f64 / (shared + 2 * each) as f64;
            let trials = 400;
            let mut ests = Vec::new();
            for _ in 0..trials {
                let common: Vec<u32> = (0..shared).map(|_| rng.gen()).collect();
                let mut a = common.clone();
                let mut b = common;
                a.extend((0..each).map(|_| rng.gen::<u32>()));
                b.extend((0..each).map(|_| rng.gen::<u32>()));
                ests.push(estimate(&m.sign(&a), &m.sign(&b)));
            }
            let mean = ests.iter().sum::<f64>() / trials as f64;
            let var = ests.iter().map(|e| (e - mean).powi(2)).sum::<f64>() / (trials - 1) as f64;
            let expected_var = j * (1.0 - j) / 128.0;
            // Standard error of the mean is sqrt(var/trials) ≈ 0.002.
            assert!((mean - j).abs() < 0.01, "J={j}: mean estimate {mean}");
            assert!(
                var < expected_var * 1.35 && var > expected_var * 0.65,
                "J={j}: variance {var} vs binomial {expected_var}"
            );
        }
    }

    #[test]
    fn estimate_handles_structured_inputs() {
        // Consecutive integers as "hashes" stress a multiplicative family.
        let m = MinHasher::new(256, 3);
        let a: Vec<u32> = (0..1000).collect();
        let b: Vec<u32> = (500..1500).collect();
        let est = estimate(&m.sign(&a), &m.sign(&b));
        assert!((est - 1.0 / 3.0).abs() < 0.1, "estimate {est}");
    }
}
