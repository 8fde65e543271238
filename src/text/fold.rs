//! The recipe's steps after NFKC, one character of NFKC output at a time:
//! case, accents, look-alikes. Context-free by design, so that the
//! character table (`super::unicode`) can store each character's result
//! and the fast paths never run this per character of a text.
//!
//! **Version 1** (`lowercase` only): a character that is not lowercase
//! takes its full Unicode lowercase mapping (`char::to_lowercase`), the
//! recipe before versions, kept bit for bit (stored data depends on it).
//!
//! **Version 2**, each step opt-out or opt-in as its option says:
//!
//! 1. `lowercase`: full Unicode *case folding* (CaseFolding.txt, statuses C
//!    and F, not the Turkic T), ICU4X's `CaseMapper::fold_string`. Case
//!    folding is what case-insensitive comparison is defined on: `ß`, `ẞ`
//!    and `SS` all become `ss`, final `ς` becomes `σ` (so `ΣΊΣΥΦΟΣ` and
//!    `σίσυφος` are one word), `İ` becomes `i` + U+0307, and the Cherokee
//!    small letters fold to their capitals. Lowercasing leaves the first
//!    two apart.
//! 2. `fold_accents` (opt-in): the canonical decomposition of step 1's
//!    output, without the characters whose General_Category is
//!    Nonspacing_Mark **and** whose Script is Inherited, recomposed (NFC):
//!    `é` → `e`, `ё` → `е`, `Ä` → `a`, Arabic harakat removed. The two
//!    properties together pick the generic diacritics (U+0300–036F and the
//!    other combining blocks, kana voicing marks too: `が` → `か`) that
//!    any script may carry, and leave the marks that belong to one script
//!    (Thai, Devanagari and other Indic vowel signs, Hebrew points: their
//!    Script is their own), which are letters of the word, not accents on
//!    it: removing them would merge unrelated words. For text where
//!    accents are typed inconsistently (names, user input, transliterated
//!    or unaccented Russian `е` for `ё`); it costs the distinction of words
//!    that differ only by an accent (French `côte` / `cote`).
//! 3. `confusables` (opt-in): the UTS #39 skeleton of step 2's output (its
//!    NFD, default-ignorable characters removed, each character replaced
//!    by its prototype from confusables.txt, NFD again), recomposed (NFC,
//!    so that a mark the skeleton decomposed stays on its letter), then
//!    steps 1 and 2 again, so that the result is stable under the recipe
//!    (a prototype may be a capital: Cyrillic `а` → Latin `a`, `0` → `O`
//!    → `o`). For spam and phishing text that swaps letters for look-alikes
//!    (`pаypal` with a Cyrillic `а` = `paypal`); it maps ASCII too (`m` →
//!    `rn`, `1` → `l`), so every text pays the character-at-a-time path.
//!
//! The class of each resulting character (whitespace, word character or
//! stripped) is taken after all of them.

use super::normalize::NormalizeOptions;
use icu_casemap::CaseMapper;
use icu_properties::props::{GeneralCategory, Script};
use icu_properties::CodePointMapData;
use unicode_normalization::UnicodeNormalization;

/// Pass to `f` each character that `c`, one character of NFKC output (or
/// of the text, without NFKC), becomes under `opts`' per-character steps.
#[inline]
pub(crate) fn fold_char(c: char, opts: &NormalizeOptions, mut f: impl FnMut(char)) {
    if opts.version < 2 {
        if opts.lowercase && !c.is_lowercase() {
            c.to_lowercase().for_each(f);
        } else {
            f(c);
        }
        return;
    }
    if c.is_ascii() && !opts.confusables {
        return f(if opts.lowercase {
            c.to_ascii_lowercase()
        } else {
            c
        });
    }
    let mut utf8 = [0u8; 4];
    let one: &str = c.encode_utf8(&mut utf8);
    let mut s = case_and_accents(one, opts);
    if opts.confusables {
        let skeleton: String = unicode_security::skeleton(&s).nfc().collect();
        s = case_and_accents(&skeleton, opts).into_owned().into();
    }
    s.chars().for_each(f);
}

/// Steps 1 and 2 of version 2 on `s`.
fn case_and_accents<'s>(s: &'s str, opts: &NormalizeOptions) -> std::borrow::Cow<'s, str> {
    let folded = if opts.lowercase {
        CaseMapper::new().fold_string(s)
    } else {
        s.into()
    };
    if opts.fold_accents && !folded.is_ascii() {
        strip_accents(&folded).into()
    } else {
        folded
    }
}

/// Whether `fold_accents` removes `c`: General_Category Nonspacing_Mark
/// and Script Inherited.
pub(crate) fn is_accent(c: char) -> bool {
    CodePointMapData::<GeneralCategory>::new().get(c) == GeneralCategory::NonspacingMark
        && CodePointMapData::<Script>::new().get(c) == Script::Inherited
}

/// `s` decomposed, its accents ([`is_accent`]) removed, recomposed.
fn strip_accents(s: &str) -> String {
    s.nfd().filter(|&c| !is_accent(c)).nfc().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fold(s: &str, opts: &NormalizeOptions) -> String {
        let mut out = String::new();
        for c in s.chars() {
            fold_char(c, opts, |x| out.push(x));
        }
        out
    }

    fn v2() -> NormalizeOptions {
        NormalizeOptions::default()
    }

    #[test]
    fn version_2_folds_case_fully() {
        let o = v2();
        assert_eq!(fold("Straße", &o), "strasse");
        assert_eq!(fold("STRAẞE", &o), "strasse");
        assert_eq!(fold("ΣΊΣΥΦΟΣ", &o), fold("σίσυφος", &o));
        assert_eq!(fold("σίσυφος", &o), "σίσυφοσ");
        assert_eq!(fold("İ", &o), "i\u{307}");
        assert_eq!(fold("ı", &o), "ı", "not Turkic folding");
        assert_eq!(fold("ＡＢ", &o), "ａｂ", "width is NFKC's, not folding's");
        // Version 1 lowercases: ß and ς stay.
        assert_eq!(fold("Straße ς", &o.legacy()), "straße ς");
        assert_eq!(fold("ẞ", &o.legacy()), "ß");
    }

    #[test]
    fn fold_accents_removes_generic_marks_and_keeps_script_vowel_signs() {
        let o = NormalizeOptions {
            fold_accents: true,
            ..v2()
        };
        assert_eq!(fold("café", &o), "cafe");
        assert_eq!(fold("гололёд", &o), "гололед");
        assert_eq!(fold("Ä", &o), "a");
        assert_eq!(fold("\u{301}", &o), "");
        assert_eq!(fold("が", &o), "か", "kana voicing is Inherited");
        // Arabic fatha (Inherited) goes; Thai, Devanagari and Hebrew marks stay.
        assert_eq!(fold("كَتَبَ", &o), "كتب");
        assert_eq!(fold("กิน", &o), "กิน");
        assert_eq!(fold("हिन्दी", &o), "हिन्दी");
        assert_eq!(fold("שָׁלוֹם", &o), "שָׁלוֹם");
        // Without the option, nothing is removed.
        assert_eq!(fold("café", &v2()), "café");
    }

    #[test]
    fn confusables_map_look_alikes_to_one_prototype_then_fold_again() {
        let o = NormalizeOptions {
            confusables: true,
            ..v2()
        };
        assert_eq!(fold("pаypal", &o), fold("paypal", &o));
        assert_eq!(fold("Ρay", &o), fold("pay", &o), "Greek capital rho");
        assert_eq!(fold("m", &o), "rn");
        assert_eq!(fold("1", &o), "l");
        assert_eq!(fold("0", &o), "o");
        // Stable: the recipe's output is a fixed point of its steps.
        for s in ["pаypal", "Straße", "ΣΊΣΥΦΟΣ", "café", "0O1lI", "ｍ"] {
            let once = fold(s, &o);
            assert_eq!(fold(&once, &o), once, "{s:?}");
        }
        // The mark of a letter the skeleton decomposes stays on it.
        assert_eq!(fold("é", &o), "é");
        let both = NormalizeOptions {
            confusables: true,
            fold_accents: true,
            ..v2()
        };
        assert_eq!(fold("é", &both), "e");
    }
}
