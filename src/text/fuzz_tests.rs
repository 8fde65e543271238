//! Fuzz-style properties of the whole text pipeline on arbitrary input:
//! arbitrary bytes (decoded lossily) and arbitrary strings go through
//! normalize → shingle (word and char, k 1..=6, set and multiset) → MinHash.
//! Nothing may panic, and each stage's output contract must hold.

use super::{
    normalize, NormalizeOptions, ShingleKind, ShingleOptions, Shingler, Tokenizer, WordSplit,
};
use crate::minhash::{estimate, MinHasher};
use proptest::prelude::*;

const NUM_PERM: usize = 32;
const SEED: u64 = 7;

/// Every valid option combination, of both recipe versions.
fn normalize_options() -> impl Strategy<Value = NormalizeOptions> {
    (0..super::normalize::OPTIONS).prop_map(|o| super::normalize::all_options()[o])
}

fn shingle_options() -> impl Strategy<Value = ShingleOptions> {
    (any::<bool>(), 1usize..=6, any::<bool>()).prop_map(|(word, k, multiset)| ShingleOptions {
        kind: if word {
            ShingleKind::Word
        } else {
            ShingleKind::Char
        },
        k,
        multiset,
    })
}

/// Texts from every angle: raw bytes, printable strings, any chars, and
/// words separated by odd whitespace and punctuation.
fn texts() -> impl Strategy<Value = String> {
    prop_oneof![
        proptest::collection::vec(any::<u8>(), 0..512)
            .prop_map(|b| String::from_utf8_lossy(&b).into_owned()),
        "\\PC*",
        any::<String>(),
        proptest::collection::vec(any::<char>(), 0..256).prop_map(|c| c.into_iter().collect()),
        "([a-zA-Zé_0-9]{1,8}[ \t\n\u{3000}\u{200B}.,!?-]{1,3}){0,40}",
        super::unicode::hard_text(120),
    ]
}

fn check_normalized(norm: &str, opts: &NormalizeOptions) -> Result<(), TestCaseError> {
    prop_assert!(!norm.starts_with(' ') && !norm.ends_with(' '), "{norm:?}");
    prop_assert!(!norm.contains("  "), "{norm:?}");
    for c in norm.chars() {
        prop_assert!(
            c == ' ' || !c.is_whitespace(),
            "whitespace {c:?} in {norm:?}"
        );
        if opts.strip_punctuation {
            prop_assert!(
                c == ' ' || super::tokens::is_word_char(c, opts),
                "{c:?} survived stripping in {norm:?}"
            );
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn the_pipeline_never_panics_and_keeps_its_contracts(
        text in texts(),
        nopts in normalize_options(),
        sopts in shingle_options(),
    ) {
        let norm = normalize(&text, &nopts);
        check_normalized(&norm, &nopts)?;
        // Bit-identical to the recipe spelled out step by step.
        prop_assert_eq!(&norm, &super::normalize::reference_normalize(&text, &nopts));
        // (Not asserted: idempotence. Lowercasing after NFKC can leave a
        // sequence that NFKC composes further, e.g. "Ά\u{345}" → "ά\u{345}"
        // → "ᾴ", so normalize(normalize(x)) may differ in rare Greek cases.)

        let shingler = Shingler::new(sopts, SEED).with_split(WordSplit::of(&nopts));
        let result = shingler.shingle(&norm);
        // The one-call tokenizer (with its reused scratch buffers) agrees.
        let tokenizer = Tokenizer::new(nopts, sopts, SEED);
        prop_assert_eq!(&tokenizer.shingles(&text), &result);
        let set = match result {
            Err(_) => {
                prop_assert!(norm.is_empty(), "only an empty text has no shingles: {norm:?}");
                return Ok(());
            }
            Ok(set) => set,
        };
        prop_assert!(!norm.is_empty());
        prop_assert!(!set.is_empty());
        prop_assert!(
            set.as_slice().windows(2).all(|w| w[0] < w[1]),
            "shingles are not sorted and distinct"
        );

        let hasher = MinHasher::new(NUM_PERM, SEED);
        let sig = hasher.sign(set.as_slice());
        prop_assert_eq!(sig.len(), NUM_PERM);
        prop_assert_eq!(&sig, &hasher.sign(set.as_slice()));
        prop_assert_eq!(&sig, &MinHasher::new(NUM_PERM, SEED).sign(set.as_slice()));
        prop_assert_eq!(estimate(&sig, &sig), 1.0);
    }
}
