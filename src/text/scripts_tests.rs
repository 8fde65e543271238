//! Version 2 of the recipe end to end (normalize, the word scanners, the
//! shingles, Jaccard): its examples, the property that makes it worth
//! having (a one-character edit in a Chinese or Japanese run changes a
//! bounded number of word shingles), and input built to hurt it.

use super::normalize::{all_options, OPTIONS};
use super::words::word_hash;
use super::{
    normalize, NormalizeOptions, Scratch, ShingleKind, ShingleOptions, ShingleSet, Tokenizer,
};
use proptest::prelude::*;

const SEED: u64 = 5;

fn tokenizer(opts: NormalizeOptions, k: usize) -> Tokenizer {
    let shingle = ShingleOptions {
        kind: ShingleKind::Word,
        k,
        multiset: false,
    };
    Tokenizer::new(opts, shingle, SEED)
}

fn shingles(text: &str, opts: NormalizeOptions, k: usize) -> ShingleSet {
    tokenizer(opts, k).shingles(text).expect("words")
}

/// Shingles in both sorted sets (`text` may not import `jaccard`).
fn common(a: &ShingleSet, b: &ShingleSet) -> usize {
    let set: std::collections::HashSet<u32> = a.as_slice().iter().copied().collect();
    b.as_slice().iter().filter(|h| set.contains(h)).count()
}

fn jaccard(a: &ShingleSet, b: &ShingleSet) -> f64 {
    let both = common(a, b);
    both as f64 / (a.len() + b.len() - both) as f64
}

/// The word hashes the scanners give `text`, against those of `words`.
fn assert_words(text: &str, opts: NormalizeOptions, words: &[&str]) {
    let t = tokenizer(opts, 3);
    let mut scratch = Scratch::default();
    let got = t.word_hashes(text, &mut scratch).to_vec();
    let key = super::words::word_key(SEED);
    let want: Vec<u64> = words.iter().map(|w| word_hash(w.as_bytes(), key)).collect();
    assert_eq!(got, want, "{text:?} → {words:?}");
}

fn v2() -> NormalizeOptions {
    NormalizeOptions::default()
}

#[test]
fn case_folding_makes_sharp_s_and_final_sigma_equal() {
    let o = v2();
    assert_eq!(normalize("Straßenbahn", &o), normalize("STRASSENBAHN", &o));
    assert_eq!(normalize("Straßenbahn", &o), "strassenbahn");
    assert_eq!(
        shingles("die Straßenbahn fährt ab", o, 3),
        shingles("DIE STRASSENBAHN FÄHRT AB", o, 3)
    );
    assert_eq!(normalize("ΣΊΣΥΦΟΣ", &o), normalize("σίσυφος", &o));
    assert_eq!(
        shingles("ο ΣΊΣΥΦΟΣ και ο ΟΔΥΣΣΕΥΣ", o, 2),
        shingles("ο σίσυφος και ο οδυσσευς", o, 2)
    );
    // Version 1 keeps them apart.
    let v1 = o.legacy();
    assert_ne!(
        normalize("Straßenbahn", &v1),
        normalize("STRASSENBAHN", &v1)
    );
}

#[test]
fn fold_accents_and_confusables_make_their_examples_equal() {
    let accents = NormalizeOptions {
        fold_accents: true,
        ..v2()
    };
    assert_eq!(
        normalize("гололёд", &accents),
        normalize("гололед", &accents)
    );
    assert_eq!(normalize("café", &accents), "cafe");
    assert_eq!(
        shingles("un café crème à Zürich", accents, 3),
        shingles("un cafe creme a Zurich", accents, 3)
    );
    assert_ne!(normalize("café", &v2()), normalize("cafe", &v2()));
    let look_alikes = NormalizeOptions {
        confusables: true,
        ..v2()
    };
    // A Cyrillic а (U+0430) in a Latin word.
    assert_eq!(
        shingles("log in to pаypal now", look_alikes, 3),
        shingles("log in to paypal now", look_alikes, 3)
    );
    assert_ne!(
        shingles("log in to pаypal now", v2(), 3),
        shingles("log in to paypal now", v2(), 3)
    );
}

#[test]
fn chinese_and_japanese_words_are_characters_and_latin_runs() {
    let o = v2();
    assert_words("iPhone15发布会", o, &["iphone15", "发", "布", "会"]);
    assert_words(
        "北京2024年GDP增长5.2%",
        o,
        &["北", "京", "2024", "年", "gdp", "增", "长", "52"],
    );
    assert_words(
        "ソニーのPlayStation 5が発売された。",
        o,
        &[
            "ソ",
            "ニ",
            "ー",
            "の",
            "playstation",
            "5",
            "が",
            "発",
            "売",
            "さ",
            "れ",
            "た",
        ],
    );
    // Half-width kana are NFKC'd first, then cut.
    assert_words("ｶﾀｶﾅ", o, &["カ", "タ", "カ", "ナ"]);
    // Korean is written with spaces: its words stay whole.
    assert_words("한국어 문장입니다", o, &["한국어", "문장입니다"]);
    // Version 1: one word per whitespace run.
    assert_words("iPhone15发布会 x", o.legacy(), &["iphone15发布会", "x"]);
}

#[test]
fn thai_words_are_its_grapheme_clusters() {
    let o = v2();
    assert_words("ภาษาไทย", o, &["ภ", "า", "ษ", "า", "ไ", "ท", "ย"]);
    // The vowel signs and the tone marks (U+0E48, U+0E49: not Alphabetic,
    // but they spell the word) attach to their consonant.
    assert_words("กิน ที่นี่", o, &["กิ", "น", "ที่", "นี่"]);
    assert_words("ข้าว ขาว", o, &["ข้", "า", "ว", "ข", "า", "ว"]);
    assert_ne!(normalize("ข้าว", &o), normalize("ขาว", &o));
    // Version 1 strips the tone marks with the punctuation: rice is white.
    let v1 = o.legacy();
    assert_eq!(normalize("ข้าว", &v1), normalize("ขาว", &v1));
}

/// Sixty characters of Chinese.
const PARAGRAPH: &str = "北京市政府周一宣布了新的城市交通发展计划，将在未来五年内\
                         建设十条地铁线路并改善公共汽车服务系统以减少道路拥堵和空气污染。";

#[test]
fn a_one_character_edit_in_a_chinese_paragraph_keeps_jaccard_high() {
    assert_eq!(PARAGRAPH.chars().count(), 60);
    let edited = PARAGRAPH.replacen("五年", "六年", 1);
    let (a, b) = (shingles(PARAGRAPH, v2(), 3), shingles(&edited, v2(), 3));
    let j = jaccard(&a, &b);
    assert!(j > 0.8, "Jaccard {j}");
    // Version 1: each clause is one word, so the edited clause's shingle
    // shares nothing.
    let (a1, b1) = (
        shingles(PARAGRAPH, v2().legacy(), 3),
        shingles(&edited, v2().legacy(), 3),
    );
    assert_eq!(jaccard(&a1, &b1), 0.0);
}

/// Runs of CJK characters (ideographs, kana, the prolonged sound mark,
/// an astral ideograph).
fn cjk_run(max: usize) -> impl Strategy<Value = Vec<char>> {
    let ch = prop_oneof![
        proptest::char::range('\u{4e00}', '\u{4e40}'),
        proptest::char::range('\u{3041}', '\u{3060}'),
        proptest::char::range('\u{30a1}', '\u{30c0}'),
        Just('ー'),
        Just('\u{20001}'),
    ];
    proptest::collection::vec(ch, 1..max)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    /// Replacing, inserting or deleting one character inside a run of n
    /// CJK characters (with Latin text around it) changes at most k word
    /// k-shingles of each text. Not with `confusables`: its skeleton maps
    /// some ideographs to several characters (`丛` → `ᄉᄉー`), so one
    /// edit there is several edits of the normalized text.
    #[test]
    fn a_one_character_edit_in_a_cjk_run_changes_at_most_2k_shingles(
        run in cjk_run(80),
        at in any::<prop::sample::Index>(),
        with in proptest::char::range('\u{4e00}', '\u{9fff}'),
        edit in 0..3u8,
        k in 1usize..=5,
        o in 0usize..OPTIONS,
    ) {
        let opts = all_options()[o];
        prop_assume!(opts.version >= 2 && !opts.confusables);
        let i = at.index(run.len());
        let mut changed = run.clone();
        match edit {
            0 => changed[i] = with,
            1 => changed.insert(i, with),
            _ => { changed.remove(i); }
        }
        let wrap = |r: &[char]| format!("see the news: {} and more", r.iter().collect::<String>());
        let t = tokenizer(opts, k);
        let (a, b) = (t.shingles(&wrap(&run)).unwrap(), t.shingles(&wrap(&changed)).unwrap());
        let both = common(&a, &b);
        let differ = (a.len() - both) + (b.len() - both);
        prop_assert!(differ <= 2 * k, "{} shingles differ", differ);
    }
}

#[test]
fn unassigned_code_points_and_lone_marks_do_not_panic() {
    for opts in all_options() {
        for text in [
            "\u{378}\u{e0080}\u{10fffd}\u{fdd0}",
            "\u{301}\u{e34}\u{3099} starts with marks",
            "\u{e34}",
            "\u{200d}日",
            "日\u{378}本\u{e0001}",
        ] {
            let norm = normalize(text, &opts);
            for kind in [ShingleKind::Word, ShingleKind::Char] {
                let shingle = ShingleOptions {
                    kind,
                    k: 3,
                    multiset: false,
                };
                let got = Tokenizer::new(opts, shingle, SEED).shingles(text);
                assert_eq!(got.is_err(), norm.is_empty(), "{text:?} {opts:?}");
            }
        }
    }
}

/// 10 MB of one ideograph: one word per character, a few million words,
/// all shingles the same one. No time limit here (tests are not
/// benchmarks), but it must finish as any 10 MB text does: linear work.
#[test]
fn ten_megabytes_of_one_ideograph_is_one_distinct_shingle() {
    let text = "日".repeat((10 << 20) / 3);
    for opts in [v2(), v2().legacy()] {
        let set = shingles(&text, opts, 3);
        assert_eq!(set.len(), 1, "{opts:?}");
    }
}
