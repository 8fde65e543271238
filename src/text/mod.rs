//! Text → shingle set: the first two stages of the pipeline.
//!
//! Pure functions with no I/O. [`normalize`] applies the recipe from
//! `EXAMPLES.md` (NFKC, lowercase, strip everything that is neither a word
//! character nor whitespace, collapse whitespace, trim); [`shingle`] cuts the
//! normalized string into word or character k-grams and hashes each one to a
//! 32-bit value. The [`Tokenizer`] bundles both with reusable scratch buffers.

pub mod normalize;
pub mod shingle;

#[cfg(test)]
mod fuzz_tests;

pub use normalize::{normalize, normalize_into, NormalizeOptions};
pub use shingle::{ShingleKind, ShingleOptions, ShingleSet, Shingler, TextError};

/// Normalizer + shingler with per-call scratch buffers; cheap to construct,
/// `Sync`, so one instance serves every thread.
#[derive(Clone, Debug)]
pub struct Tokenizer {
    normalize: NormalizeOptions,
    shingler: Shingler,
}

impl Tokenizer {
    pub fn new(normalize: NormalizeOptions, shingle: ShingleOptions, seed: u64) -> Self {
        Self {
            normalize,
            shingler: Shingler::new(shingle, seed),
        }
    }

    pub fn normalize_options(&self) -> &NormalizeOptions {
        &self.normalize
    }

    pub fn shingler(&self) -> &Shingler {
        &self.shingler
    }

    /// Normalize and shingle `text`. Errors when nothing is left to shingle.
    pub fn shingles(&self, text: &str) -> Result<ShingleSet, TextError> {
        thread_local! {
            static SCRATCH: std::cell::RefCell<(String, Vec<u32>)> =
                const { std::cell::RefCell::new((String::new(), Vec::new())) };
        }
        SCRATCH.with(|cell| {
            let mut guard = cell.borrow_mut();
            let (norm, hashes) = &mut *guard;
            normalize_into(text, &self.normalize, norm);
            let set = self.shingler.shingle_with(norm, hashes);
            // Large documents would otherwise pin their buffers on this thread forever.
            if norm.capacity() > 1 << 20 {
                *norm = String::new();
            }
            if hashes.capacity() > 1 << 18 {
                *hashes = Vec::new();
            }
            set
        })
    }
}
