//! Recipe version 2 ("text for every script") through the API: real
//! Chinese, Japanese and Thai prose (`tests/fixtures/realtext/`), each
//! paragraph with one planted character edit, found again by `POST
//! /similar` at the default threshold; and the worked examples of
//! `docs/examples.md` ("Text in every script"), held to by `GET /compare`
//! and `POST /explain`.
//!
//! Expected values come from a reference written here, apart from the
//! server: NFKC (the `unicode-normalization` crate), lowercasing (case
//! folding is the same for these texts: Han, kana and Thai have no case,
//! their Latin words are ASCII), the punctuation rule, and the word units
//! of version 2 with small range lists for the characters these texts hold
//! (checked against the Unicode Line_Break and Grapheme_Cluster_Break
//! properties of every character of the fixtures, and of U+0E00–U+0E7F,
//! U+3000–U+30FF and U+4E00–U+9FFF, when the lists were written).

use crate::helpers::{encode, spawn_app_with, test_settings, TestApp};
use neardup::testkit::QUESTION_PAIRS;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet};
use unicode_normalization::UnicodeNormalization;

const ZH: &str = include_str!("../fixtures/realtext/zh.txt");
const JA: &str = include_str!("../fixtures/realtext/ja.txt");
const TH: &str = include_str!("../fixtures/realtext/th.txt");

/// English prose stored beside the fixtures (it must not match them either).
const EN: &[&str] = &[
    "The night is dark and the moon is red.",
    "Near-duplicate detection finds pairs of documents that share most of their word shingles.",
    "A collection stores documents under one recipe: normalization, shingles, MinHash and banding.",
];

// --- The reference -----------------------------------------------------

/// A *solo* character (Line_Break ID, CJ or SA): a word unit of its own
/// with the attaching characters after it. Han, kana (with `ー`, the
/// ideographic closing mark and number zero, Hangzhou numerals, vertical
/// repeat marks, `ゟ`, `ヿ`) and Thai letters; not Thai digits (Line_Break
/// NU), nor `々`, `ゝ`, `ゞ`, `ヽ`, `ヾ`, `ー`'s neighbours `゠` and `・`
/// (NS: they join the run around them, or are punctuation).
fn solo(c: char) -> bool {
    matches!(c as u32,
        0x0E01..=0x0E3A | 0x0E40..=0x0E4E // Thai letters, vowels, marks
        | 0x3006..=0x3007 | 0x3021..=0x3029 | 0x3031..=0x3034 | 0x3038..=0x303A
        | 0x3041..=0x3096 | 0x309F // Hiragana
        | 0x30A1..=0x30FA | 0x30FC | 0x30FF | 0x31F0..=0x31FF // Katakana
        // Han
        | 0x3400..=0x4DBF | 0x4E00..=0x9FFF | 0xF900..=0xFAFF | 0x20000..=0x3FFFF)
}

/// An *attaching* character (Grapheme_Cluster_Break Extend, SpacingMark or
/// ZWJ): the Thai vowel signs above and below and the tone marks, the
/// ideographic tone marks, the combining kana voicing marks.
fn attaching(c: char) -> bool {
    matches!(c as u32,
        0x0E31 | 0x0E33..=0x0E3A | 0x0E47..=0x0E4E | 0x302A..=0x302F | 0x3099..=0x309A | 0x200D)
}

/// NFKC, lowercase, remove what is neither alphanumeric nor `_` (an
/// attaching mark stays with its letter: the Thai tone marks, which are not
/// Alphabetic, are kept as the recipe's example `ข้` keeps them), collapse
/// whitespace.
fn reference_normalize(text: &str) -> String {
    let mut out = String::new();
    let mut pending_space = false;
    // Case folding is lowercasing for every character these texts hold but
    // `ß` (→ `ss`) and a final `ς` (→ `σ`).
    let folded = text
        .nfkc()
        .flat_map(char::to_lowercase)
        .flat_map(|c| match c {
            'ß' => vec!['s', 's'],
            'ς' => vec!['σ'],
            c => vec![c],
        });
    for c in folded {
        if c.is_whitespace() {
            pending_space = true;
        } else if c.is_alphanumeric() || c == '_' || (attaching(c) && c != '\u{200D}') {
            if pending_space && !out.is_empty() {
                out.push(' ');
            }
            pending_space = false;
            out.push(c);
        }
    }
    out
}

/// The word units of version 2: the normalized text split at spaces; inside
/// a word, each solo character with the attaching characters after it is a
/// unit, and each maximal run of other characters is one.
fn reference_units(norm: &str) -> Vec<&str> {
    let mut units = Vec::new();
    for word in norm.split(' ').filter(|w| !w.is_empty()) {
        let mut start = 0;
        let mut in_run = false;
        for (i, c) in word.char_indices() {
            if i == 0 {
                in_run = !solo(c);
                continue;
            }
            if attaching(c) {
                continue;
            }
            let is_solo = solo(c);
            if is_solo || !in_run {
                units.push(&word[start..i]);
                start = i;
            }
            in_run = !is_solo;
        }
        units.push(&word[start..]);
    }
    units
}

/// Distinct word 3-shingles (one shingle of all units when there are fewer).
fn reference_shingles(text: &str) -> BTreeSet<String> {
    let norm = reference_normalize(text);
    let units = reference_units(&norm);
    match units.len() {
        0 => BTreeSet::new(),
        1..=2 => BTreeSet::from([units.join(" ")]),
        _ => units.windows(3).map(|w| w.join(" ")).collect(),
    }
}

/// (intersection, union) of the word 3-shingle sets.
fn reference_overlap(a: &str, b: &str) -> (usize, usize) {
    let (sa, sb) = (reference_shingles(a), reference_shingles(b));
    let inter = sa.intersection(&sb).count();
    (inter, sa.len() + sb.len() - inter)
}

fn jaccard(a: &str, b: &str) -> f64 {
    let (i, u) = reference_overlap(a, b);
    i as f64 / u as f64
}

#[test]
fn the_reference_reads_the_recipes_examples() {
    let units = |s: &str| {
        reference_units(&reference_normalize(s))
            .into_iter()
            .map(str::to_owned)
            .collect::<Vec<_>>()
    };
    assert_eq!(units("iphone15发布会"), ["iphone15", "发", "布", "会"]);
    assert_eq!(units("กินข้าว"), ["กิ", "น", "ข้", "า", "ว"]);
    assert_eq!(
        units("新しいiPhoneを買いました。"),
        ["新", "し", "い", "iphone", "を", "買", "い", "ま", "し", "た"]
    );
    assert_eq!(units("人々 ゝ"), ["人", "々", "ゝ"]);
    assert_eq!(reference_overlap("a b", "a b"), (1, 1));
}

// --- Planted edits -----------------------------------------------------

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Edit {
    Substitute,
    Insert,
    Delete,
}

/// The class of a character the edits work on (a character of another
/// class of the same script would not be "the same script" enough: a kana
/// for a kanji), or `None` for characters the edits leave alone.
fn class(lang: &str, c: char) -> Option<u8> {
    let u = c as u32;
    match lang {
        "th" => (0x0E01..=0x0E2E).contains(&u).then_some(0), // consonants
        _ if (0x3041..=0x3096).contains(&u) => Some(1),      // hiragana
        _ if (0x30A1..=0x30FA).contains(&u) => Some(2),      // katakana
        _ if (0x4E00..=0x9FFF).contains(&u) => Some(3),      // Han
        _ => None,
    }
}

/// `text` with one edit at a random character of a planted class that is
/// not the first character and follows another character of the script
/// (so the edit is inside a run of the script): a substitution by another
/// character of the same class, an insertion of one before it, or its
/// deletion. Alphabets are each language's characters of each class.
fn plant(
    text: &str,
    lang: &str,
    edit: Edit,
    alphabet: &BTreeMap<u8, Vec<char>>,
    rng: &mut StdRng,
) -> String {
    let mut chars: Vec<char> = text.chars().collect();
    let sites: Vec<usize> = (1..chars.len())
        .filter(|&i| class(lang, chars[i]).is_some() && !chars[i - 1].is_whitespace())
        .filter(|&i| solo(chars[i - 1]) || attaching(chars[i - 1]))
        .collect();
    assert!(!sites.is_empty(), "nowhere to plant an edit in {text:?}");
    let i = sites[rng.gen_range(0..sites.len())];
    let letters = &alphabet[&class(lang, chars[i]).unwrap()];
    let other = |rng: &mut StdRng| loop {
        let c = letters[rng.gen_range(0..letters.len())];
        if c != chars[i] {
            break c;
        }
    };
    match edit {
        Edit::Substitute => chars[i] = other(rng),
        Edit::Insert => {
            let c = other(rng);
            chars.insert(i, c)
        }
        Edit::Delete => {
            chars.remove(i);
        }
    }
    chars.into_iter().collect()
}

fn paragraphs(text: &str) -> Vec<&str> {
    text.lines().filter(|l| !l.trim().is_empty()).collect()
}

async fn post_similar(app: &TestApp, text: &str) -> Vec<(String, f64)> {
    let resp = app.post_json("/similar", &json!({"text": text})).await;
    assert_eq!(resp.status(), 200, "POST /similar");
    let body: Value = resp.json().await.unwrap();
    body["results"]
        .as_array()
        .expect("results")
        .iter()
        .map(|r| {
            (
                r["id"].as_str().unwrap().to_owned(),
                r["jaccard"].as_f64().unwrap(),
            )
        })
        .collect()
}

#[tokio::test]
async fn real_paragraphs_with_one_planted_character_edit_are_found() {
    let app = spawn_app_with(test_settings()).await;
    let langs = [
        ("zh", paragraphs(ZH)),
        ("ja", paragraphs(JA)),
        ("th", paragraphs(TH)),
    ];
    assert_eq!(
        langs.iter().map(|(_, p)| p.len()).collect::<Vec<_>>(),
        [30, 30, 20]
    );

    // Every paragraph, and some English, in the default collection.
    let mut stored: Vec<(String, &str)> = Vec::new();
    for (lang, paras) in &langs {
        for (i, p) in paras.iter().enumerate() {
            stored.push((format!("{lang}-{}", i + 1), p));
        }
    }
    for (i, t) in EN
        .iter()
        .copied()
        .chain(QUESTION_PAIRS.iter().map(|q| q.a))
        .enumerate()
    {
        stored.push((format!("en-{}", i + 1), t));
    }
    for (id, text) in &stored {
        app.insert(id, text).await;
    }

    // Different paragraphs are not alike (the reference says so, far below
    // the threshold), and the server reports none of them similar to another.
    let mut worst = (0.0, "", "");
    for (x, (ida, a)) in stored.iter().enumerate() {
        for (idb, b) in &stored[x + 1..] {
            let j = jaccard(a, b);
            if j > worst.0 {
                worst = (j, ida, idb);
            }
        }
    }
    assert!(worst.0 < 0.5, "fixture paragraphs alike: {worst:?}");
    for (id, _) in &stored {
        let body = app.similar(id, None, None).await;
        assert_eq!(body["results"], json!([]), "GET /similar?id={id}");
    }

    let mut rng = StdRng::seed_from_u64(42);
    let mut summary = Vec::new();
    for (lang, paras) in &langs {
        let mut alphabet: BTreeMap<u8, BTreeSet<char>> = BTreeMap::new();
        for c in paras.iter().flat_map(|p| p.chars()) {
            if let Some(k) = class(lang, c) {
                alphabet.entry(k).or_default().insert(c);
            }
        }
        let mut alphabet: BTreeMap<u8, Vec<char>> = alphabet
            .into_iter()
            .map(|(k, v)| (k, v.into_iter().collect()))
            .collect();
        if *lang == "th" {
            alphabet.insert(0, ('\u{0E01}'..='\u{0E2E}').collect());
        }
        let (mut at_threshold, mut found, mut long, mut long_at) = (0, 0, 0, 0);
        for (i, original) in paras.iter().enumerate() {
            let id = format!("{lang}-{}", i + 1);
            let edit = [Edit::Substitute, Edit::Insert, Edit::Delete][i % 3];
            let copy = plant(original, lang, edit, &alphabet, &mut rng);
            assert_ne!(&copy, original);
            let expected = jaccard(original, &copy);
            let results = post_similar(&app, &copy).await;
            // Nothing but its own original is similar to an edited paragraph.
            for (other, j) in &results {
                assert_eq!(
                    other, &id,
                    "{edit:?} copy of {id} reported similar to {other} (jaccard {j})\n\
                     copy: {copy}"
                );
            }
            let hit = results.iter().find(|(other, _)| other == &id);
            if let Some((_, j)) = hit {
                found += 1;
                assert!(
                    (j - expected).abs() < 1e-9,
                    "{id} ({edit:?}): the server's Jaccard {j} is not the reference's {expected}\n\
                     original: {original}\ncopy:     {copy}"
                );
            }
            if expected >= 0.8 {
                at_threshold += 1;
                assert!(
                    hit.is_some(),
                    "{id} ({edit:?}): Jaccard {expected} ≥ 0.8 by the reference, \
                     but POST /similar did not find the original\n\
                     original: {original}\ncopy:     {copy}"
                );
            }
            if original.chars().count() >= 40 {
                long += 1;
                long_at += usize::from(expected >= 0.8);
            }
        }
        summary.push(format!(
            "{lang}: {} pairs, {at_threshold} at Jaccard ≥ 0.8 (all found), {found} found",
            paras.len()
        ));
        if *lang != "th" {
            assert!(
                long_at * 10 >= long * 9,
                "{lang}: only {long_at} of {long} planted pairs (paragraphs of ≥ 40 characters) \
                 have word-3 Jaccard ≥ 0.8"
            );
        }
    }
    eprintln!("{}", summary.join("\n"));
}

// --- The worked examples of docs/examples.md ---------------------------

/// One worked example: its collection (`None`: the default one), its pair,
/// the units and shingles of each side, and the shared and total shingles.
struct Worked {
    name: &'static str,
    collection: Option<&'static str>,
    a: &'static str,
    b: &'static str,
    units: (u64, u64),
    shingles: (u64, u64),
    intersection: u64,
    union: u64,
}

const WORKED: &[Worked] = &[
    Worked {
        name: "zh",
        collection: None,
        a: "今天下午一起去公园散步吧。",
        b: "今天下午一起去花园散步吧。",
        units: (12, 12),
        shingles: (10, 10),
        intersection: 7,
        union: 13,
    },
    Worked {
        name: "zh-v1",
        collection: Some("legacy"),
        a: "今天下午一起去公园散步吧。",
        b: "今天下午一起去花园散步吧。",
        units: (1, 1),
        shingles: (1, 1),
        intersection: 0,
        union: 2,
    },
    Worked {
        name: "ja",
        collection: None,
        a: "新しいiPhoneを買いました。",
        b: "新しいiPhoneも買いました。",
        units: (10, 10),
        shingles: (8, 8),
        intersection: 5,
        union: 11,
    },
    Worked {
        name: "th",
        collection: None,
        a: "ฉันกินข้าวที่บ้าน",
        b: "ฉันกินข้าวที่ร้าน",
        units: (11, 11),
        shingles: (9, 9),
        intersection: 6,
        union: 12,
    },
    Worked {
        name: "de",
        collection: None,
        a: "Straßenbahn",
        b: "STRASSENBAHN",
        units: (1, 1),
        shingles: (1, 1),
        intersection: 1,
        union: 1,
    },
    Worked {
        name: "de-v1",
        collection: Some("legacy"),
        a: "Straßenbahn",
        b: "STRASSENBAHN",
        units: (1, 1),
        shingles: (1, 1),
        intersection: 0,
        union: 2,
    },
    Worked {
        name: "ru",
        collection: None,
        a: "гололёд на дороге",
        b: "гололед на дороге",
        units: (3, 3),
        shingles: (1, 1),
        intersection: 0,
        union: 2,
    },
    Worked {
        name: "ru-fold",
        collection: Some("accents"),
        a: "гололёд на дороге",
        b: "гололед на дороге",
        units: (3, 3),
        shingles: (1, 1),
        intersection: 1,
        union: 1,
    },
    Worked {
        name: "confusables-off",
        collection: None,
        a: "paypal login",
        b: "p\u{0430}ypal login",
        units: (2, 2),
        shingles: (1, 1),
        intersection: 0,
        union: 2,
    },
    Worked {
        name: "confusables",
        collection: Some("skeleton"),
        a: "paypal login",
        b: "p\u{0430}ypal login",
        units: (2, 2),
        shingles: (1, 1),
        intersection: 1,
        union: 1,
    },
];

#[tokio::test]
async fn the_worked_examples_of_examples_md_hold() {
    let app = spawn_app_with(test_settings()).await;
    for (name, normalize) in [
        ("legacy", json!({"version": 1})),
        ("accents", json!({"fold_accents": true})),
        ("skeleton", json!({"confusables": true})),
    ] {
        let resp = app
            .put_json(
                &format!("/collections/{name}"),
                &json!({"normalize": normalize}),
            )
            .await;
        let status = resp.status().as_u16();
        assert_eq!(
            status,
            201,
            "PUT /collections/{name}: {}",
            resp.text().await.unwrap_or_default()
        );
    }
    for w in WORKED {
        let prefix = w
            .collection
            .map(|c| format!("/collections/{c}"))
            .unwrap_or_default();
        let (ida, idb) = (format!("{}-a", w.name), format!("{}-b", w.name));
        for (id, text) in [(&ida, w.a), (&idb, w.b)] {
            let resp = app
                .post_json(
                    &format!("{prefix}/documents"),
                    &json!({"id": id, "text": text}),
                )
                .await;
            assert_eq!(resp.status(), 201, "{}: storing {id}", w.name);
        }
        let cmp = app
            .get_json(&format!(
                "{prefix}/compare?a={}&b={}",
                encode(&ida),
                encode(&idb)
            ))
            .await;
        let expected = w.intersection as f64 / w.union as f64;
        assert_eq!(
            (cmp["intersection"].as_u64(), cmp["union"].as_u64()),
            (Some(w.intersection), Some(w.union)),
            "{}: GET /compare {cmp}",
            w.name
        );
        assert!(
            (cmp["jaccard"].as_f64().unwrap() - expected).abs() < 1e-12,
            "{}: {cmp}",
            w.name
        );
        let resp = app
            .post_json(
                &format!("{prefix}/explain"),
                &json!({"a": {"text": w.a}, "b": {"text": w.b}}),
            )
            .await;
        assert_eq!(resp.status(), 200, "{}: POST /explain", w.name);
        let ex: Value = resp.json().await.unwrap();
        // Passages are marked on the texts as sent, to the character, also
        // under fold_accents and confusables.
        for side in ["a", "b"] {
            assert_eq!(ex[side]["alignment"], "grapheme", "{}: {ex}", w.name);
        }
        assert_eq!(
            (ex["a"]["units"].as_u64(), ex["b"]["units"].as_u64()),
            (Some(w.units.0), Some(w.units.1)),
            "{}: units",
            w.name
        );
        assert_eq!(
            (ex["a"]["shingles"].as_u64(), ex["b"]["shingles"].as_u64()),
            (Some(w.shingles.0), Some(w.shingles.1)),
            "{}: shingles",
            w.name
        );
        assert_eq!(
            (ex["intersection"].as_u64(), ex["union"].as_u64()),
            (Some(w.intersection), Some(w.union)),
            "{}: POST /explain",
            w.name
        );
        // The reference agrees where it applies (version 2, no opt-in step).
        if w.collection.is_none() {
            assert_eq!(
                reference_overlap(w.a, w.b),
                (w.intersection as usize, w.union as usize),
                "{}: the reference",
                w.name
            );
        }
    }
}
