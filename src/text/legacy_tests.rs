//! Version 1 of the recipe, held bit for bit: stored shingle sets and
//! signatures of collections made before recipe versions depend on it.
//! The values below were recorded from the code before version 2 was
//! implemented (commit 7123117), for a sample of the scripts and cases
//! version 2 changes: English typography, German ß/ẞ, Greek final sigma,
//! Russian ё, Chinese, Japanese (with half-width kana), Thai, a Cyrillic
//! `а` in a Latin word, combining marks, Turkish İ, ligatures, Hangul
//! jamo and emoji. Each option combination of version 1 is checked: the
//! normalized string, the word 3-shingles (the scanners) and the
//! character 3-shingles, as digests, and the default's normalized strings
//! written out.

use super::{normalize, NormalizeOptions, ShingleKind, ShingleOptions, Tokenizer};
use xxhash_rust::xxh3::xxh3_64;

pub(super) const SAMPLES: [&str; 12] = [
    "The “quick” brown fox’s £5 café — naïve résumé, don't.",
    "Die Straße, STRASSE und GROẞ: Äpfel für Öl.",
    "ΟΔΥΣΣΕΥΣ και Σίσυφος, ς σ Σ ΣΊΣΥΦΟΣ.",
    "Ёлка и ещё ЁЖ — ёлочка, гололёд.",
    "中文文本，还有数字2024年和iPhone15发布会。北京市政府周一宣布新的交通计划",
    "日本語のテキスト、カタカナ（ｶﾀｶﾅ）とひらがな。ソニーのPlayStation5が発売",
    "ภาษาไทย กินข้าว ที่นี่",
    "pаypal аpple Ρay",
    "cafe\u{301} e\u{301}\u{323} \u{301}lead q\u{307} \u{3099}か\u{3099}",
    "İstanbul ıi ﬁne ＡＢＣ x²\u{a0}y ① ½ ㏂",
    "한국어 ᄒ\u{1161}ᆫ글 emoji 😀👍🏻 zwj 👩\u{200d}💻 a\u{200b}b",
    "Mixed CASE ascii, with: punctuation!! and\ttabs",
];

/// The options of version 1: every combination of its three steps.
fn legacy(o: usize) -> NormalizeOptions {
    NormalizeOptions {
        nfkc: o & 4 == 0,
        lowercase: o & 2 == 0,
        strip_punctuation: o & 1 == 0,
        ..NormalizeOptions::default()
    }
    .legacy()
}

fn digest_u32(v: &[u32]) -> u64 {
    let bytes: Vec<u8> = v.iter().flat_map(|h| h.to_le_bytes()).collect();
    xxh3_64(&bytes)
}

/// For a sample and an option combination: the digests of the normalized
/// string, its word 3-shingles and its character 3-shingles.
fn digests(text: &str, opts: &NormalizeOptions) -> [u64; 3] {
    let shingles = |kind| {
        let t = Tokenizer::new(
            *opts,
            ShingleOptions {
                kind,
                k: 3,
                multiset: false,
            },
            1,
        );
        let set = t.shingles(text);
        // The reference path (the normalized string, cut at spaces) agrees.
        let reference = super::Shingler::new(*t.shingler().options(), 1)
            .with_split(super::WordSplit::Whitespace)
            .shingle(&normalize(text, opts));
        assert_eq!(set, reference, "{text:?} {opts:?}");
        set.map_or(0, |s| digest_u32(s.as_slice()))
    };
    [
        xxh3_64(normalize(text, opts).as_bytes()),
        shingles(ShingleKind::Word),
        shingles(ShingleKind::Char),
    ]
}

/// The normalized samples under version 1's default options (NFKC,
/// lowercase, strip): Unicode lowercasing keeps `ß` and `ς`, no accent is
/// folded, and the Chinese, Japanese and Thai runs are one word each.
const NORMALIZED: [&str; 12] = [
    "the quick brown foxs 5 café naïve résumé dont",
    "die straße strasse und groß äpfel für öl",
    "οδυσσευσ και σίσυφος ς σ σ σίσυφοσ",
    "ёлка и ещё ёж ёлочка гололёд",
    "中文文本还有数字2024年和iphone15发布会北京市政府周一宣布新的交通计划",
    "日本語のテキストカタカナカタカナとひらがなソニーのplaystation5が発売",
    "ภาษาไทย ก\u{e34}นขาว ท\u{e35}น\u{e35}",
    "pаypal аpple ρay",
    "café ẹ lead q が",
    "istanbul ıi fine abc x2 y 1 12 am",
    "한국어 한글 emoji zwj ab",
    "mixed case ascii with punctuation and tabs",
];

/// [`digests`] of each sample, 12 per option combination (`legacy(0)` to
/// `legacy(7)`).
#[rustfmt::skip]
const DIGESTS: [[u64; 3]; 96] = [
    [0xe55be05149685466, 0x8805c4b931d37503, 0xb51de0b067e45afb],
    [0x75accba3a690f214, 0xc4e8caf9274665df, 0xc160ff31982d5e60],
    [0x4e1a9a50213f63f4, 0x44b405bbbb882f24, 0xe4aaac8f7d00a11a],
    [0xbd3f51be3de60a2d, 0x910ed8b7f180157a, 0x75d6f5433c9f46ca],
    [0x450c9ad22b74575e, 0xfd6df5671e7d0353, 0x6f871ec8c8a86e0f],
    [0x29a64a80996a0863, 0xb8afbc0a3db41367, 0x3274b8d844126ef7],
    [0xde851f5ad864daef, 0x22a7f3433e1ca235, 0xebbd1f48e0685abf],
    [0x1d7188b2fbf3f41c, 0x64eb654e733974c4, 0xd59cf560861ea401],
    [0x6be949d9be503d08, 0xa8a19260f1fa032f, 0x934f5f8388fd4c4d],
    [0xfed4a369852a042f, 0x2b816d3a3c8def18, 0x79c60661c81b99ac],
    [0x08473d74869e1f01, 0x0fca61a3c3896426, 0xe728634a595ebf8d],
    [0x590ff905199efe63, 0x7fe9ff852b539f21, 0xf55ae591fa3a035f],
    [0x6904c6b535e01fb8, 0x28567f8904bae0a4, 0x69c0c3b98297cbbc],
    [0x0cc5a2fbb556f46d, 0xba7d0b3b534addc4, 0x5771abcdf8f9f32b],
    [0xcd21e473e2ff0e7e, 0x189b3d9695b14fbc, 0xdedf15fcbb997487],
    [0xd54f511bfa44dba4, 0xa4b363f3c0577024, 0x4c235323b77a5244],
    [0xe71056a6f1015dce, 0xf7ed1f68c1f0c23e, 0x1e1c4880c5fde874],
    [0x73be1438efbd1f6c, 0xbbf8257d1892727f, 0xa3284e678fbe83c1],
    [0x9981b4d799d32252, 0x4dee1f5b736afb7e, 0x0e0148d317995cbe],
    [0x1d7188b2fbf3f41c, 0x64eb654e733974c4, 0xd59cf560861ea401],
    [0xf7ed1b85a5587e1a, 0x52b57876721c1c7b, 0x76b31d7bc15128b2],
    [0x16ea9fc5f8467e27, 0x7da9076d83b62bfd, 0xd1c43a8fa7496f77],
    [0xdb996cd2c0f509b5, 0x6eefb0ac70aa0a7c, 0xdaa33902c4ebf316],
    [0xa3d97f63730229a1, 0x8dcb06d19e642a67, 0xece3575244723540],
    [0xe6fd09a03eacf811, 0xe1f8b90e2ba37b94, 0x7339a68af71e285e],
    [0x38d7f32a59a1bc34, 0x9bb141a5e43d1488, 0x256bd148dba4ecc9],
    [0xf03884dc5f310f64, 0xe07ac4e41f8e4218, 0x976c5b1d21ce58c9],
    [0xdfbbca701b277575, 0xc2bc4e5a7d0ed92b, 0x2c96e5a2386e73e6],
    [0x665c887c27d0f567, 0x096b32f6370397a8, 0x65938a1cb5ed92a5],
    [0xaa5ddab556baf05d, 0xbf0a6f0604704996, 0x0f5982358bd81cd1],
    [0xde851f5ad864daef, 0x22a7f3433e1ca235, 0xebbd1f48e0685abf],
    [0xf99d3a705552e505, 0xc80b3d29ceea6f30, 0xcdb5a805810d32ee],
    [0x6be949d9be503d08, 0xa8a19260f1fa032f, 0x934f5f8388fd4c4d],
    [0xf4752633946bdda9, 0xac81dc1250636108, 0x9d895f3b03cacf97],
    [0x08473d74869e1f01, 0x0fca61a3c3896426, 0xe728634a595ebf8d],
    [0x420ab6ee57426206, 0xc9a49ce6d6c8c871, 0xd458621405fad406],
    [0x1452c15b622427cd, 0x608971573eda9da4, 0xad714cf3ec56d5f9],
    [0x9feeff4b578bac89, 0xfcf4f1c025d1aee8, 0x258911dd3abebb20],
    [0x3eb78cf1248b2558, 0xf4741ba0504cdff0, 0x9576bdcde6f37e40],
    [0x77428c1ff77e211c, 0x539208bc97d3ff29, 0xc833d00069186078],
    [0x562d60fe1ebf847f, 0xddff121eb22c6652, 0x51352f4f40b93c2f],
    [0x91a549d06c2f19cf, 0xb6402737e4ea464f, 0xa9ad1bef3996f7b1],
    [0x9981b4d799d32252, 0x4dee1f5b736afb7e, 0x0e0148d317995cbe],
    [0xf99d3a705552e505, 0xc80b3d29ceea6f30, 0xcdb5a805810d32ee],
    [0xf7ed1b85a5587e1a, 0x52b57876721c1c7b, 0x76b31d7bc15128b2],
    [0x998a833873bd4a6b, 0x08a7828954a883d0, 0x55e26683e12cfb87],
    [0xdb996cd2c0f509b5, 0x6eefb0ac70aa0a7c, 0xdaa33902c4ebf316],
    [0xfbd955b9bab97bcc, 0xc63915d68604a356, 0xcd8a89a41f29b355],
    [0xe55be05149685466, 0x8805c4b931d37503, 0xb51de0b067e45afb],
    [0x75accba3a690f214, 0xc4e8caf9274665df, 0xc160ff31982d5e60],
    [0x4e1a9a50213f63f4, 0x44b405bbbb882f24, 0xe4aaac8f7d00a11a],
    [0xbd3f51be3de60a2d, 0x910ed8b7f180157a, 0x75d6f5433c9f46ca],
    [0x450c9ad22b74575e, 0xfd6df5671e7d0353, 0x6f871ec8c8a86e0f],
    [0x1f65ce937f3453e0, 0xce5b1d49f39c43dd, 0x2b604cd966f812ac],
    [0xde851f5ad864daef, 0x22a7f3433e1ca235, 0xebbd1f48e0685abf],
    [0x1d7188b2fbf3f41c, 0x64eb654e733974c4, 0xd59cf560861ea401],
    [0xa8a2b0ef319d1094, 0x5385026d22a760a9, 0x8b093d79e12efc87],
    [0x7d6ae715cf13ba9b, 0xd390e48f32c0a675, 0x97714fb297bdcf9e],
    [0x3a866382572dfd19, 0xe46b9d5d655c0d31, 0xab97c68efc2730e1],
    [0x590ff905199efe63, 0x7fe9ff852b539f21, 0xf55ae591fa3a035f],
    [0x6904c6b535e01fb8, 0x28567f8904bae0a4, 0x69c0c3b98297cbbc],
    [0x0cc5a2fbb556f46d, 0xba7d0b3b534addc4, 0x5771abcdf8f9f32b],
    [0xcd21e473e2ff0e7e, 0x189b3d9695b14fbc, 0xdedf15fcbb997487],
    [0xd54f511bfa44dba4, 0xa4b363f3c0577024, 0x4c235323b77a5244],
    [0x97ab0c73d05e964b, 0x2c396083c82b9c48, 0xeb1e2995cc1ce824],
    [0xe996722522161bd6, 0xf64ef895b9acca91, 0x6831245f43f8e0a2],
    [0x9981b4d799d32252, 0x4dee1f5b736afb7e, 0x0e0148d317995cbe],
    [0x1d7188b2fbf3f41c, 0x64eb654e733974c4, 0xd59cf560861ea401],
    [0x1d3929b9346b99c6, 0x9a53a09b8345bc0d, 0x82f25be5c70924c1],
    [0x7dee39ee20c84d13, 0xbd28e95ce8d96770, 0x0ef27cca50d07658],
    [0xb9734fe052eb1d48, 0xcefc7657f0888556, 0xc9d783a60213d0fe],
    [0xa3d97f63730229a1, 0x8dcb06d19e642a67, 0xece3575244723540],
    [0xe6fd09a03eacf811, 0xe1f8b90e2ba37b94, 0x7339a68af71e285e],
    [0x38d7f32a59a1bc34, 0x9bb141a5e43d1488, 0x256bd148dba4ecc9],
    [0xf03884dc5f310f64, 0xe07ac4e41f8e4218, 0x976c5b1d21ce58c9],
    [0xdfbbca701b277575, 0xc2bc4e5a7d0ed92b, 0x2c96e5a2386e73e6],
    [0x665c887c27d0f567, 0x096b32f6370397a8, 0x65938a1cb5ed92a5],
    [0xc276ce859821d0af, 0xfb3a32427c62e334, 0x0ce1b65ec64daa20],
    [0xde851f5ad864daef, 0x22a7f3433e1ca235, 0xebbd1f48e0685abf],
    [0xf99d3a705552e505, 0xc80b3d29ceea6f30, 0xcdb5a805810d32ee],
    [0xa8a2b0ef319d1094, 0x5385026d22a760a9, 0x8b093d79e12efc87],
    [0xa184df794a3e5711, 0xc547aaa83d003cf6, 0x8712031b9bf866a3],
    [0x3a866382572dfd19, 0xe46b9d5d655c0d31, 0xab97c68efc2730e1],
    [0x420ab6ee57426206, 0xc9a49ce6d6c8c871, 0xd458621405fad406],
    [0x1452c15b622427cd, 0x608971573eda9da4, 0xad714cf3ec56d5f9],
    [0x9feeff4b578bac89, 0xfcf4f1c025d1aee8, 0x258911dd3abebb20],
    [0x3eb78cf1248b2558, 0xf4741ba0504cdff0, 0x9576bdcde6f37e40],
    [0x77428c1ff77e211c, 0x539208bc97d3ff29, 0xc833d00069186078],
    [0xb1cd367a490aea04, 0x696ee6a8583b88df, 0x36f0c6a38a6dc24f],
    [0xd388ca45820a96ef, 0x98efa82bba08ec85, 0xe91599232fe5a607],
    [0x9981b4d799d32252, 0x4dee1f5b736afb7e, 0x0e0148d317995cbe],
    [0xf99d3a705552e505, 0xc80b3d29ceea6f30, 0xcdb5a805810d32ee],
    [0x1d3929b9346b99c6, 0x9a53a09b8345bc0d, 0x82f25be5c70924c1],
    [0x8acb85824ae12784, 0x586691bab1fa3080, 0x9a2d2d1b8feac457],
    [0xb9734fe052eb1d48, 0xcefc7657f0888556, 0xc9d783a60213d0fe],
    [0xfbd955b9bab97bcc, 0xc63915d68604a356, 0xcd8a89a41f29b355],
];

#[test]
fn version_1_normalizes_the_samples_as_before_versions() {
    for (text, want) in SAMPLES.iter().zip(NORMALIZED) {
        assert_eq!(normalize(text, &legacy(0)), want, "{text:?}");
    }
}

#[test]
fn version_1_shingles_every_option_combination_as_before_versions() {
    for o in 0..8 {
        for (i, text) in SAMPLES.iter().enumerate() {
            assert_eq!(
                digests(text, &legacy(o)),
                DIGESTS[o * 12 + i],
                "options {o} ({:?}), {text:?}",
                legacy(o)
            );
        }
    }
}
