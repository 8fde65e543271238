//! The median the benches report: of rounds, of latencies. One definition,
//! so that every bench picks the same middle of an even count.

/// The median of `v`: the upper middle of an even count (`v` not empty).
pub fn median(v: &[f64]) -> f64 {
    let mut v = v.to_vec();
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}
