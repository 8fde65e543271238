//! Which document of a set of near-duplicates is the original, and which
//! one a keep policy keeps: the one ordering every answer uses (groups of
//! `/duplicates`, `/similar`, the drop list online and offline).
//!
//! A document's *time* is the RFC 3339 value of its collection's
//! `originals.time_field` in its metadata (a top-level key whose value is
//! a string that parses, any offset, taken in UTC milliseconds) when that
//! field is configured, present and valid; otherwise when it was stored
//! (`created_at`). The original is the earliest by time, ties to the
//! smaller id (byte order), so every answer names the same one.
//!
//! Pure: metadata is the stored JSON text, and only the one key asked for
//! is decoded (the others are skipped unread).

use super::Record;
use serde::de::{DeserializeSeed, IgnoredAny, MapAccess, Visitor};
use std::cmp::Ordering;
use std::fmt;

/// Longest metadata field name a setting or a `keep=max:` names, in bytes.
pub const MAX_FIELD_BYTES: usize = 256;

/// The time of a document for originals (ms since the epoch, UTC; may be
/// before 1970 when the field says so).
pub fn time_of(metadata: Option<&str>, created_ms: u64, field: Option<&str>) -> i64 {
    field
        .and_then(|f| metadata_time(metadata?, f))
        .unwrap_or_else(|| i64::try_from(created_ms).unwrap_or(i64::MAX))
}

/// [`time_of`] for a stored record.
pub fn record_time(record: &Record, field: Option<&str>) -> i64 {
    time_of(record.metadata(), record.created_ms(), field)
}

/// The value of `field` in `metadata` as an RFC 3339 time, if it is one.
fn metadata_time(metadata: &str, field: &str) -> Option<i64> {
    use time::format_description::well_known::Rfc3339;
    let serde_json::Value::String(s) = metadata_field(metadata, field)? else {
        return None;
    };
    let t = time::OffsetDateTime::parse(&s, &Rfc3339).ok()?;
    i64::try_from(t.unix_timestamp_nanos().div_euclid(1_000_000)).ok()
}

/// The number `field` holds in `metadata` (a JSON number; a string is not
/// one), for `keep=max:<field>`.
pub fn metadata_number(metadata: Option<&str>, field: &str) -> Option<f64> {
    match metadata_field(metadata?, field)? {
        serde_json::Value::Number(n) => n.as_f64(),
        _ => None,
    }
}

/// The top-level value of `field` in the JSON object `metadata` (the last
/// one if the key repeats); every other value is skipped, not decoded.
fn metadata_field(metadata: &str, field: &str) -> Option<serde_json::Value> {
    let mut de = serde_json::Deserializer::from_str(metadata);
    OneField(field).deserialize(&mut de).ok().flatten()
}

struct OneField<'f>(&'f str);

impl<'de> DeserializeSeed<'de> for OneField<'_> {
    type Value = Option<serde_json::Value>;

    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for OneField<'_> {
    type Value = Option<serde_json::Value>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut found = None;
        while let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? {
            if key == self.0 {
                found = Some(map.next_value::<serde_json::Value>()?);
            } else {
                map.next_value::<IgnoredAny>()?;
            }
        }
        Ok(found)
    }

    // Metadata that is not an object has no fields.
    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(None)
    }
    fn visit_str<E: serde::de::Error>(self, _: &str) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_bool<E: serde::de::Error>(self, _: bool) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_i64<E: serde::de::Error>(self, _: i64) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_u64<E: serde::de::Error>(self, _: u64) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_f64<E: serde::de::Error>(self, _: f64) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_unit<E: serde::de::Error>(self) -> Result<Self::Value, E> {
        Ok(None)
    }
}

/// A document as the ordering sees it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Dated<'a> {
    pub id: &'a str,
    /// [`time_of`].
    pub time_ms: i64,
}

impl Dated<'_> {
    /// Earlier first; the same time: the smaller id (byte order) first.
    pub fn cmp_age(&self, other: &Dated<'_>) -> Ordering {
        self.time_ms
            .cmp(&other.time_ms)
            .then_with(|| self.id.as_bytes().cmp(other.id.as_bytes()))
    }
}

/// The original of `docs`: the earliest, ties to the smaller id; `None`
/// when there are none.
pub fn original<'a>(docs: impl IntoIterator<Item = Dated<'a>>) -> Option<Dated<'a>> {
    docs.into_iter().min_by(|a, b| a.cmp_age(b))
}

/// Which member of a group a dedup keeps; every other is dropped.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum Keep {
    /// The original (the earliest by time, ties to the smaller id).
    #[default]
    Oldest,
    /// The latest by the same time (ties to the smaller id).
    Newest,
    /// The most distinct shingles (the size the index measures; ties to
    /// the oldest).
    Longest,
    /// The highest number in this top-level metadata field (a JSON number;
    /// members without one rank below every member with one; ties to the
    /// oldest).
    Max(Box<str>),
}

impl Keep {
    /// `oldest`, `newest`, `longest` or `max:<field>` (1 to
    /// [`MAX_FIELD_BYTES`] bytes); the error names the parameter `name`.
    pub fn parse(name: &str, raw: &str) -> Result<Self, String> {
        match raw {
            "oldest" => Ok(Self::Oldest),
            "newest" => Ok(Self::Newest),
            "longest" => Ok(Self::Longest),
            _ => match raw.strip_prefix("max:") {
                Some(f) if !f.is_empty() && f.len() <= MAX_FIELD_BYTES => Ok(Self::Max(f.into())),
                Some(f) => Err(format!(
                    "{name}=max:<field> needs a metadata field name of 1 to {MAX_FIELD_BYTES} bytes, got {} bytes",
                    f.len()
                )),
                None => Err(format!(
                    "{name} must be oldest, newest, longest or max:<field>, got {:?}",
                    raw.chars().take(80).collect::<String>()
                )),
            },
        }
    }

    pub fn as_string(&self) -> String {
        match self {
            Self::Oldest => "oldest".into(),
            Self::Newest => "newest".into(),
            Self::Longest => "longest".into(),
            Self::Max(f) => format!("max:{f}"),
        }
    }
}

/// A member as a keep policy ranks it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Ranked<'a> {
    pub dated: Dated<'a>,
    /// Its distinct shingles.
    pub shingles: usize,
    /// With `Keep::Max`: the field's number, if it has one.
    pub value: Option<f64>,
}

impl<'a> Ranked<'a> {
    /// `record` ranked for `keep`, its time by `field`.
    pub fn of(record: &'a Record, keep: &Keep, field: Option<&str>) -> Self {
        Self {
            dated: Dated {
                id: record.id().as_str(),
                time_ms: record_time(record, field),
            },
            shingles: record.shingles().len(),
            value: match keep {
                Keep::Max(f) => metadata_number(record.metadata(), f),
                _ => None,
            },
        }
    }
}

/// Whether `keep` prefers `a` to `b` (a total order: exactly one member
/// of a group wins).
fn prefers(keep: &Keep, a: &Ranked<'_>, b: &Ranked<'_>) -> bool {
    let oldest = || a.dated.cmp_age(&b.dated) == Ordering::Less;
    match keep {
        Keep::Oldest => oldest(),
        Keep::Newest => match a.dated.time_ms.cmp(&b.dated.time_ms) {
            Ordering::Equal => a.dated.id.as_bytes() < b.dated.id.as_bytes(),
            o => o == Ordering::Greater,
        },
        Keep::Longest => match a.shingles.cmp(&b.shingles) {
            Ordering::Equal => oldest(),
            o => o == Ordering::Greater,
        },
        Keep::Max(_) => match (a.value, b.value) {
            (Some(x), Some(y)) => match x.total_cmp(&y) {
                Ordering::Equal => oldest(),
                o => o == Ordering::Greater,
            },
            (Some(_), None) => true,
            (None, Some(_)) => false,
            (None, None) => oldest(),
        },
    }
}

/// The position in `members` of the one `keep` keeps; `None` when empty.
pub fn kept(keep: &Keep, members: &[Ranked<'_>]) -> Option<usize> {
    let mut best: Option<usize> = None;
    for (i, m) in members.iter().enumerate() {
        if best.is_none_or(|b| prefers(keep, m, &members[b])) {
            best = Some(i);
        }
    }
    best
}

/// The original member of `group` (its position in `group.members`).
pub fn group_original(group: &super::Group, field: Option<&str>) -> usize {
    let ranked: Vec<Ranked<'_>> = group
        .members
        .iter()
        .map(|m| Ranked::of(&m.record, &Keep::Oldest, field))
        .collect();
    kept(&Keep::Oldest, &ranked).unwrap_or(0)
}

/// The member of `group` that `keep` keeps (its position in `group.members`).
pub fn group_kept(group: &super::Group, keep: &Keep, field: Option<&str>) -> usize {
    let ranked: Vec<Ranked<'_>> = group
        .members
        .iter()
        .map(|m| Ranked::of(&m.record, keep, field))
        .collect();
    kept(keep, &ranked).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    const F: Option<&str> = Some("published_at");

    #[test]
    fn the_field_wins_over_created_at_in_any_offset() {
        let t = |m: &str| time_of(Some(m), 5, F);
        assert_eq!(t(r#"{"published_at": "1970-01-01T00:00:01Z"}"#), 1000);
        assert_eq!(t(r#"{"published_at": "1970-01-01T02:00:01+02:00"}"#), 1000);
        assert_eq!(
            t(r#"{"published_at": "1970-01-01T00:00:01.250-00:30"}"#),
            1_801_250
        );
        assert_eq!(t(r#"{"published_at": "1969-12-31T23:59:59Z"}"#), -1000);
        // Other keys, nested objects and escapes are skipped unread.
        assert_eq!(
            t(
                r#"{"a": {"published_at": "2001-01-01T00:00:00Z"}, "t\u00eftre": "“Été” £", "published_at": "1970-01-01T00:00:00.007Z"}"#
            ),
            7
        );
    }

    #[test]
    fn a_missing_or_invalid_field_falls_back_to_created_at() {
        for m in [
            r#"{"published_at": "yesterday"}"#,
            r#"{"published_at": "2026-13-01T00:00:00Z"}"#,
            r#"{"published_at": "2026-01-01 00:00:00"}"#,
            r#"{"published_at": 1700000000}"#,
            r#"{"published_at": null}"#,
            r#"{"other": "2026-01-01T00:00:00Z"}"#,
            r#"["published_at", "2026-01-01T00:00:00Z"]"#,
            r#""2026-01-01T00:00:00Z""#,
            "not json",
        ] {
            assert_eq!(time_of(Some(m), 42, F), 42, "{m}");
        }
        assert_eq!(time_of(None, 42, F), 42);
        let set = r#"{"published_at": "2026-01-01T00:00:00Z"}"#;
        assert_eq!(time_of(Some(set), 42, None), 42, "no field configured");
    }

    #[test]
    fn ties_go_to_the_smaller_id_in_byte_order() {
        let d = |id, time_ms| Dated { id, time_ms };
        let o = original([d("b", 5), d("a", 5), d("c", 4)]).unwrap();
        assert_eq!(o.id, "c");
        let o = original([d("é", 5), d("z", 5), d("Z", 5)]).unwrap();
        assert_eq!(o.id, "Z", "bytes: 'Z' < 'z' < 'é'");
        assert!(original(Vec::<Dated>::new()).is_none());
    }

    fn r(id: &str, time_ms: i64, shingles: usize, value: Option<f64>) -> Ranked<'_> {
        Ranked {
            dated: Dated { id, time_ms },
            shingles,
            value,
        }
    }

    #[test]
    fn each_policy_keeps_exactly_the_member_it_names() {
        let m = [
            r("b", 10, 50, Some(3.0)),
            r("a", 10, 70, None),
            r("c", 30, 70, Some(3.0)),
            r("d", 20, 10, Some(-1.0)),
            r("e", 30, 5, None),
        ];
        assert_eq!(kept(&Keep::Oldest, &m), Some(1), "a: 10, smaller id than b");
        assert_eq!(kept(&Keep::Newest, &m), Some(2), "c: 30, smaller id than e");
        assert_eq!(kept(&Keep::Longest, &m), Some(1), "a and c: 70; a is older");
        let max = Keep::Max("votes".into());
        assert_eq!(kept(&max, &m), Some(0), "b and c: 3; b is older");
        let none = [r("x", 2, 1, None), r("y", 1, 1, None)];
        assert_eq!(kept(&max, &none), Some(1), "nobody has it: the oldest");
        assert_eq!(kept(&Keep::Oldest, &[]), None);
    }

    #[test]
    fn numbers_only_count_for_max() {
        let m = Some(r#"{"votes": 12.5, "views": "100", "likes": -3}"#);
        assert_eq!(metadata_number(m, "votes"), Some(12.5));
        assert_eq!(
            metadata_number(m, "views"),
            None,
            "a string is not a number"
        );
        assert_eq!(metadata_number(m, "likes"), Some(-3.0));
        assert_eq!(metadata_number(m, "missing"), None);
        assert_eq!(metadata_number(None, "votes"), None);
    }

    #[test]
    fn keep_parses_and_names_the_parameter() {
        assert_eq!(Keep::parse("keep", "newest"), Ok(Keep::Newest));
        assert_eq!(
            Keep::parse("keep", "max:prix_€"),
            Ok(Keep::Max("prix_€".into()))
        );
        assert_eq!(Keep::parse("keep", "max:a").unwrap().as_string(), "max:a");
        for bad in [
            "",
            "Oldest",
            "max:",
            "min:x",
            &format!("max:{}", "x".repeat(257)),
        ] {
            let e = Keep::parse("keep", bad).unwrap_err();
            assert!(e.starts_with("keep"), "{e}");
        }
        assert!(Keep::parse("keep", &format!("max:{}", "x".repeat(256))).is_ok());
    }
}
