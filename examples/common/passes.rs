//! The estimator of the two single-thread text benches (`sign_bench`,
//! `text_bench`): the fastest of whole passes (their rounds' median is
//! `common/median.rs`).
//! (`sign_bench`'s module docs say why whole passes and not the fastest
//! run of each chunk of documents.)

use std::time::Instant;

/// The fastest of `repeat` passes of `f` over `0..n`, in seconds: each
/// item once a pass.
pub fn best_of(n: usize, repeat: usize, mut f: impl FnMut(std::ops::Range<usize>)) -> f64 {
    (0..repeat)
        .map(|_| {
            let t = Instant::now();
            f(0..n);
            t.elapsed().as_secs_f64()
        })
        .fold(f64::INFINITY, f64::min)
}
