//! Text → shingle set: the first two stages of the pipeline.
//!
//! Pure functions with no I/O. [`normalize()`] applies the recipe from
//! `docs/examples.md` (NFKC, fold case, strip everything that is neither a word
//! character nor whitespace, collapse whitespace, trim), in the version the
//! options name (version 2, the default: full case folding, opt-in accent
//! folding and look-alike mapping, `fold`; version 1, lowercasing, for data
//! from before versions); [`tokens`] cuts its words (at spaces, and in
//! version 2 around each character of the scripts written without spaces:
//! Han, kana, Thai); [`shingle`] cuts the
//! normalized string into word or character k-grams and hashes each one to a
//! 32-bit value, word shingles from per-word hashes ([`words`]). The
//! [`Tokenizer`] bundles both with reusable scratch buffers, and for word
//! shingles fuses normalization and word hashing into one pass that never
//! writes the normalized string: ASCII texts with bit masks alone, the
//! others with a per-character lookup table for their non-ASCII characters
//! as well (`unicode`), falling back
//! to the full NFKC algorithm only around characters that combine with
//! their neighbours. Every fast path is tested bit for bit against the
//! recipe spelled out step by step.
//! [`align`] traces every unit of the normalized text back to the span of
//! the original it came from (for explanations); [`snippet`] cuts a text
//! as posted after its first words (what a list shows under an id).

pub mod align;
mod fold;
mod kernel;
pub mod normalize;
pub mod shingle;
pub mod snippet;
pub mod tokens;
mod unicode;
pub mod winnow;
pub mod words;

#[cfg(test)]
mod fuzz_tests;
#[cfg(test)]
mod legacy_tests;
#[cfg(test)]
mod scripts_tests;

pub use normalize::{
    normalize, normalize_into, recipe_version, NormalizeOptions, LEGACY_TEXT_VERSION, TEXT_VERSION,
};
pub use shingle::{Scratch, ShingleKind, ShingleOptions, ShingleSet, Shingler, TextError};
pub use tokens::WordSplit;

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
            shingler: Shingler::new(shingle, seed).with_split(WordSplit::of(&normalize)),
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
            static SCRATCH: std::cell::RefCell<Scratch> =
                std::cell::RefCell::new(Scratch::default());
        }
        SCRATCH.with(|cell| {
            let scratch = &mut *cell.borrow_mut();
            let set = self.hashes(text, scratch).map(ShingleSet::from_sorted);
            scratch.trim();
            set
        })
    }

    /// The sorted, distinct shingle hashes of `text`, left in `scratch`: no
    /// allocation once its buffers have grown.
    pub fn hashes<'s>(&self, text: &str, scratch: &'s mut Scratch) -> Result<&'s [u32], TextError> {
        let shingler = &self.shingler;
        scratch.hashes.clear();
        match shingler.options().kind {
            ShingleKind::Word => {
                self.word_hashes(text, scratch);
                shingler.combine(&scratch.words, &mut scratch.hashes);
                shingler.finish(&mut scratch.hashes, &mut scratch.spare)
            }
            ShingleKind::Char => {
                let mut norm = std::mem::take(&mut scratch.norm);
                normalize_into(text, &self.normalize, &mut norm);
                let n = shingler.hashes_with(&norm, scratch).map(<[u32]>::len);
                scratch.norm = norm;
                n.map(|n| &scratch.hashes[..n])
            }
        }
    }

    /// Every shingle hash of `text` in text order, repeats kept (a
    /// passage lookup follows runs of them), left in `scratch`.
    pub fn ordered_hashes<'s>(&self, text: &str, scratch: &'s mut Scratch) -> &'s [u32] {
        let shingler = &self.shingler;
        scratch.hashes.clear();
        match shingler.options().kind {
            ShingleKind::Word => {
                self.word_hashes(text, scratch);
                shingler.combine(&scratch.words, &mut scratch.hashes);
            }
            ShingleKind::Char => {
                let mut norm = std::mem::take(&mut scratch.norm);
                normalize_into(text, &self.normalize, &mut norm);
                shingler.ordered_hashes_with(&norm, scratch);
                scratch.norm = norm;
            }
        }
        &scratch.hashes
    }

    /// The window that selects this recipe's passage fingerprints
    /// ([`winnow`]): a token is a word or a character.
    pub fn window(&self) -> usize {
        match self.shingler.options().kind {
            ShingleKind::Word => winnow::WORD_WINDOW,
            ShingleKind::Char => winnow::CHAR_WINDOW,
        }
    }

    /// Normalize and shingle `text`, and select its passage fingerprints:
    /// the set, and the bitmap over it of the shingles winnowing keeps
    /// ([`winnow`], with [`Self::window`]).
    pub fn shingles_selected(&self, text: &str) -> Result<(ShingleSet, Box<[u32]>), TextError> {
        thread_local! {
            static SCRATCH: std::cell::RefCell<Scratch> =
                std::cell::RefCell::new(Scratch::default());
        }
        let w = self.window();
        SCRATCH.with(|cell| {
            let scratch = &mut *cell.borrow_mut();
            self.ordered_hashes(text, scratch);
            let mut selected = std::mem::take(&mut scratch.selected);
            selected.clear();
            winnow::winnow(&scratch.hashes, w, &mut selected);
            let set = self
                .shingler
                .finish(&mut scratch.hashes, &mut scratch.spare)
                .map(ShingleSet::from_sorted);
            let out = set.map(|set| {
                let bits = winnow::selection_bitmap(set.as_slice(), &mut selected);
                (set, bits)
            });
            scratch.selected = selected;
            scratch.trim();
            out
        })
    }

    /// Make now the lookup tables that the first text with non-ASCII
    /// characters would otherwise make while it is hashed (8.6 ms in a
    /// release build on a Zen 4 for the word scanner's, see
    /// `kernel::warm`): a server calls this before it serves, so that no
    /// request waits for them. Character shingles never run the word
    /// scanner, so they need only the character table. Once per
    /// normalization options and process; later calls, and tokenizers
    /// with the same options, find them made.
    pub fn warm(&self) {
        let chars = unicode::CharTable::get(&self.normalize);
        if self.shingler.options().kind == ShingleKind::Word {
            kernel::warm(chars);
        }
    }

    /// The 64-bit hash of every word of normalized `text`, in order, left in
    /// `scratch` (the first stage of word shingling). An ASCII text takes
    /// the ASCII scanner, any other the Unicode one; neither builds the
    /// normalized string.
    pub fn word_hashes<'s>(&self, text: &str, scratch: &'s mut Scratch) -> &'s [u64] {
        scratch.words.clear();
        let key = self.shingler.word_key();
        words::utf8_word_hashes(
            text,
            unicode::CharTable::get(&self.normalize),
            key,
            &mut scratch.ascii,
            &mut scratch.words,
        );
        &scratch.words
    }
}
