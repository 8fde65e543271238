//! A collection's settings: its recipe (normalization, shingles), its index
//! parameters and its retention, and the name it is addressed by.
//!
//! A `PUT /collections/{name}` body gives any subset of the sections and
//! of their keys; whatever it leaves out comes from the server's
//! configuration ([`CollectionSettings::from_body`]). Settings are compared
//! key by key in a fixed order, so a conflicting `PUT` can name the first
//! key that differs ([`CollectionSettings::first_difference`]).

pub use crate::config::{EventFeed, Originals, Retention, Review};
use crate::engine::{EngineParams, EngineParamsError, IndexParams, ValidParams};
use crate::text::{NormalizeOptions, ShingleOptions};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::fmt;

/// The name of the collection the unprefixed routes serve.
pub const DEFAULT_COLLECTION: &str = "default";
/// Longest collection name, in characters.
pub const MAX_NAME_LEN: usize = 64;

/// A collection name: 1–64 characters of `[a-z0-9_-]`, so it is safe as a
/// path segment, a directory name and a metric label without escaping.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(transparent)]
pub struct CollectionName(Box<str>);

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "collection name {0:?} is invalid: use 1 to {MAX_NAME_LEN} characters of a-z, 0-9, '_' and '-'"
)]
pub struct InvalidName(pub String);

impl CollectionName {
    pub fn parse(s: &str) -> Result<Self, InvalidName> {
        let ok = !s.is_empty()
            && s.len() <= MAX_NAME_LEN
            && s.bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'-');
        if ok {
            Ok(Self(s.into()))
        } else {
            Err(InvalidName(s.chars().take(80).collect()))
        }
    }

    pub fn default_collection() -> Self {
        Self(DEFAULT_COLLECTION.into())
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    pub fn is_default(&self) -> bool {
        &*self.0 == DEFAULT_COLLECTION
    }
}

impl fmt::Display for CollectionName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Everything that defines a collection.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CollectionSettings {
    pub shingle: ShingleOptions,
    pub normalize: NormalizeOptions,
    pub index: IndexParams,
    pub retention: Retention,
    /// Keep every document's text as posted, on disk (`persist::texts`).
    pub store_text: bool,
    /// Which member of a set of near-duplicates is the original.
    pub originals: Originals,
    /// The event feed without a webhook (`docs/webhooks.md`).
    pub events: EventFeed,
    /// The review desk: whether pairs judged not duplicates are left out
    /// of groups and `if_unique` (`docs/review.md, "Excluding judged pairs"`), and the
    /// metadata field that titles snippets.
    pub review: Review,
}

/// `base` with the keys of the `review` object `patch` (a `PUT` body's
/// section or a `PATCH`), each checked, so an error names the key.
pub fn review_over(base: &Review, patch: &Value) -> Result<Review, SettingsError> {
    let bad = |m: String| SettingsError::Review(m);
    let Some(keys) = patch.as_object() else {
        return Err(bad(format!(
            "review must be an object of exclude_not_duplicates and snippet_field, got {}",
            short(patch)
        )));
    };
    let mut r = base.clone();
    for (k, v) in keys {
        match k.as_str() {
            "exclude_not_duplicates" => {
                r.exclude_not_duplicates = v.as_bool().ok_or_else(|| {
                    bad(format!(
                        "review.exclude_not_duplicates must be true or false, got {}",
                        short(v)
                    ))
                })?;
            }
            "snippet_field" => {
                r.snippet_field = match v {
                    Value::Null => None,
                    Value::String(f) => Some(f.clone()),
                    _ => {
                        return Err(bad(format!(
                            "review.snippet_field must be a metadata field name or null, got {}",
                            short(v)
                        )))
                    }
                };
            }
            other => {
                return Err(bad(format!(
                    "review.{}: no such key; the keys are exclude_not_duplicates and snippet_field",
                    other.chars().take(60).collect::<String>()
                )))
            }
        }
    }
    r.check().map_err(bad)?;
    Ok(r)
}

/// `base` with the keys of the `events` object `patch` (a `PUT` body's
/// section or a `PATCH`), each checked for its type; the result is checked
/// against the recipe by [`CollectionSettings::validate`].
pub fn events_over(base: &EventFeed, patch: &Value) -> Result<EventFeed, SettingsError> {
    use crate::engine::{Measure, Score};
    let bad = |m: String| SettingsError::Events(m);
    let Some(keys) = patch.as_object() else {
        return Err(bad(
            "events must be an object of feed, measure, score and threshold".into(),
        ));
    };
    let mut e = *base;
    for (k, v) in keys {
        match k.as_str() {
            "feed" => {
                e.feed = v
                    .as_bool()
                    .ok_or_else(|| bad(format!("events.feed must be true or false, got {v}")))?;
            }
            "measure" => {
                e.measure = v.as_str().and_then(Measure::parse).ok_or_else(|| {
                    bad(format!(
                        "events.measure must be one of \"jaccard\", \"query_in_stored\", \"stored_in_query\", \"containment\", got {}",
                        short(v)
                    ))
                })?;
            }
            "score" => {
                e.score = v.as_str().and_then(Score::parse).ok_or_else(|| {
                    bad(format!(
                        "events.score must be \"raw\" or \"content\", got {}",
                        short(v)
                    ))
                })?;
            }
            "threshold" => {
                e.threshold = match v {
                    Value::Null => None,
                    Value::Number(n) => n.as_f64(),
                    _ => {
                        return Err(bad(format!(
                            "events.threshold must be a number in (0, 1] or null, got {}",
                            short(v)
                        )))
                    }
                };
            }
            other => {
                return Err(bad(format!(
                    "events.{}: no such key; the keys are feed, measure, score and threshold",
                    other.chars().take(60).collect::<String>()
                )))
            }
        }
    }
    Ok(e)
}

/// A JSON value for an error message, cut to 60 characters.
fn short(v: &Value) -> String {
    v.to_string().chars().take(60).collect()
}

/// `PATCH /collections/{name}` `{"boilerplate": {...}}`: the keys given
/// replace the collection's, the others stay.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BoilerplatePatch {
    pub enabled: Option<bool>,
    pub share: Option<f64>,
    pub min_docs: Option<usize>,
    pub min_collection_docs: Option<usize>,
}

impl BoilerplatePatch {
    /// `base` with this patch's keys, checked.
    pub fn apply(
        &self,
        base: &crate::engine::BoilerplateParams,
    ) -> Result<crate::engine::BoilerplateParams, SettingsError> {
        let mut p = base.clone();
        if let Some(v) = self.enabled {
            p.enabled = v;
        }
        if let Some(v) = self.share {
            p.share = v;
        }
        if let Some(v) = self.min_docs {
            p.min_docs = v;
        }
        if let Some(v) = self.min_collection_docs {
            p.min_collection_docs = v;
        }
        p.check().map_err(SettingsError::Boilerplate)?;
        Ok(p)
    }
}

/// Settings as a manifest or a catalog entry stores them (`deserialize_with`).
/// Those written before the text recipe had versions name none: their data
/// is written with version 1, and keeps it until a reindex.
pub fn stored<'de, D: serde::Deserializer<'de>>(d: D) -> Result<CollectionSettings, D::Error> {
    use serde::de::Error;
    let mut value = Value::deserialize(d)?;
    if let Some(sections) = value.as_object_mut() {
        name_legacy_version(
            sections
                .entry("normalize")
                .or_insert_with(|| Value::Object(Map::new())),
        );
    }
    serde_json::from_value(value).map_err(D::Error::custom)
}

/// A `normalize` section as stored data has it (an export header's too,
/// `deserialize_with`): version 1 if it names none.
pub fn stored_normalize<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> Result<NormalizeOptions, D::Error> {
    use serde::de::Error;
    let mut value = Value::deserialize(d)?;
    name_legacy_version(&mut value);
    serde_json::from_value(value).map_err(D::Error::custom)
}

/// The stored `normalize` object `section` with `version` 1 if it names none.
fn name_legacy_version(section: &mut Value) {
    if let Some(keys) = section.as_object_mut() {
        keys.entry("version")
            .or_insert(crate::text::LEGACY_TEXT_VERSION.into());
    }
}

/// Why a settings body was refused; names the key.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SettingsError {
    #[error("the settings do not match the schema: {0}")]
    Shape(String),
    #[error(transparent)]
    Engine(#[from] EngineParamsError),
    #[error("{0}")]
    Retention(String),
    #[error("{0}")]
    Boilerplate(String),
    #[error("{0}")]
    Originals(String),
    #[error("{0}")]
    Events(String),
    #[error("{0}")]
    Review(String),
}

impl CollectionSettings {
    /// The recipe and index parameters, checked (with their banding).
    pub fn validate(&self) -> Result<ValidParams, SettingsError> {
        self.retention.check().map_err(SettingsError::Retention)?;
        self.originals.check().map_err(SettingsError::Originals)?;
        self.review.check().map_err(SettingsError::Review)?;
        let valid = self.engine_params().validate()?;
        self.check_events(valid.bands().min_query_threshold)?;
        Ok(valid)
    }

    /// The `events` setting against this recipe (`min_query_threshold`:
    /// its banding's).
    pub fn check_events(&self, min_query_threshold: f64) -> Result<(), SettingsError> {
        self.events
            .check(min_query_threshold, self.index.boilerplate.enabled)
            .map_err(SettingsError::Events)
    }

    pub fn engine_params(&self) -> EngineParams {
        EngineParams {
            normalize: self.normalize,
            shingle: self.shingle,
            index: self.index.clone(),
        }
    }

    /// `body` (a JSON object of optional sections, each of optional keys)
    /// over `defaults`, key by key, then checked.
    pub fn from_body(defaults: &Self, body: &Value) -> Result<(Self, ValidParams), SettingsError> {
        let mut merged = serde_json::to_value(defaults).expect("settings serialize");
        let mut body = body.clone();
        integral_floats_to_integers(&mut body);
        // The `events` section is read key by key, so an error names it.
        let events = match body.as_object_mut().and_then(|b| b.remove("events")) {
            Some(e) => Some(events_over(&defaults.events, &e)?),
            None => None,
        };
        let review = match body.as_object_mut().and_then(|b| b.remove("review")) {
            Some(r) => Some(review_over(&defaults.review, &r)?),
            None => None,
        };
        overlay(&mut merged, &body);
        let mut settings: Self =
            serde_json::from_value(merged).map_err(|e| SettingsError::Shape(e.to_string()))?;
        if let Some(e) = events {
            settings.events = e;
        }
        if let Some(r) = review {
            settings.review = r;
        }
        let valid = settings.validate()?;
        Ok((settings, valid))
    }

    /// Whether `body` names `normalize.version`.
    pub fn names_version(body: &Value) -> bool {
        body.get("normalize")
            .and_then(Value::as_object)
            .is_some_and(|n| n.contains_key("version"))
    }

    /// The first key whose value differs between an existing collection
    /// (`self`) and what a `PUT` of `body` asks for (`requested`): a body
    /// that does not name `normalize.version` asks for the collection's
    /// own, so a client that creates its collections at every start still
    /// meets those written before versions as they are.
    pub fn conflict_with(&self, requested: &Self, body: &Value) -> Option<(String, Value, Value)> {
        let mut requested = requested.clone();
        if !Self::names_version(body) {
            requested.normalize.version = self.normalize.version;
        }
        self.first_difference(&requested)
    }

    /// Every key as `section.key` with its value, in a fixed order.
    fn keys(&self) -> Vec<(String, Value)> {
        let value = serde_json::to_value(self).expect("settings serialize");
        let mut out = Vec::new();
        for section in ["shingle", "normalize", "index", "retention"] {
            if let Some(Value::Object(map)) = value.get(section) {
                for (k, v) in map {
                    out.push((format!("{section}.{k}"), v.clone()));
                }
            }
        }
        out.push(("store_text".into(), Value::Bool(self.store_text)));
        out.push((
            "originals.time_field".into(),
            self.originals
                .time_field
                .clone()
                .map_or(Value::Null, Value::String),
        ));
        if let Ok(Value::Object(map)) = serde_json::to_value(self.events) {
            for (k, v) in map {
                out.push((format!("events.{k}"), v));
            }
        }
        out.push((
            "review.exclude_not_duplicates".into(),
            Value::Bool(self.review.exclude_not_duplicates),
        ));
        out.push((
            "review.snippet_field".into(),
            self.review
                .snippet_field
                .clone()
                .map_or(Value::Null, Value::String),
        ));
        out
    }

    /// The first key whose value differs, as `(key, self's, other's)`.
    pub fn first_difference(&self, other: &Self) -> Option<(String, Value, Value)> {
        self.keys()
            .into_iter()
            .zip(other.keys())
            .find(|((_, a), (_, b))| a != b)
            .map(|((key, a), (_, b))| (key, a, b))
    }
}

/// JSON Schema counts `5.0` as an integer: every number in `value` that is
/// a whole non-negative float within `u64` becomes that integer, so typed
/// settings accept what the published schema allows.
pub fn integral_floats_to_integers(value: &mut Value) {
    match value {
        Value::Number(n) if !n.is_u64() && !n.is_i64() => {
            if let Some(f) = n.as_f64() {
                // 2^64 itself is not a u64; below it every whole f64 is exact.
                if f.fract() == 0.0 && (0.0..18_446_744_073_709_551_616.0).contains(&f) {
                    *value = Value::from(f as u64);
                }
            }
        }
        Value::Object(map) => map.values_mut().for_each(integral_floats_to_integers),
        Value::Array(items) => items.iter_mut().for_each(integral_floats_to_integers),
        _ => {}
    }
}

/// Merge `top` into `base`: objects key by key, anything else replaced.
fn overlay(base: &mut Value, top: &Value) {
    match (base, top) {
        (Value::Object(b), Value::Object(t)) => {
            for (k, v) in t {
                match b.get_mut(k) {
                    Some(slot) if slot.is_object() && v.is_object() => overlay(slot, v),
                    _ => {
                        b.insert(k.clone(), v.clone());
                    }
                }
            }
        }
        (b, t) => *b = t.clone(),
    }
}

/// An empty JSON object (a body that gives no section).
pub fn empty_body() -> Value {
    Value::Object(Map::new())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn names_are_lowercase_ascii_words() {
        for ok in ["a", "bodies", "titles-2026", "t_1", &"x".repeat(64)] {
            assert!(CollectionName::parse(ok).is_ok(), "{ok}");
        }
        for bad in [
            "",
            "Bodies",
            "a b",
            "a/b",
            "é",
            "..",
            &"x".repeat(65),
            "a%2Fb",
        ] {
            assert!(CollectionName::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_body_overrides_only_what_it_gives() {
        let defaults = CollectionSettings::default();
        let body = json!({"shingle": {"kind": "char", "k": 5}, "index": {"threshold": 0.7}});
        let (s, valid) = CollectionSettings::from_body(&defaults, &body).unwrap();
        assert_eq!(s.shingle.k, 5);
        assert!(!s.shingle.multiset, "from the defaults");
        assert_eq!(s.index.threshold, 0.7);
        assert_eq!(s.index.num_perm, 128);
        assert!(valid.bands().min_query_threshold < 0.7);
        let (same, _) = CollectionSettings::from_body(&defaults, &empty_body()).unwrap();
        assert_eq!(same, defaults);
    }

    #[test]
    fn bad_bodies_name_the_key() {
        let d = CollectionSettings::default();
        let e = CollectionSettings::from_body(&d, &json!({"index": {"threshold": 1.5}}))
            .unwrap_err()
            .to_string();
        assert!(e.contains("index.threshold"), "{e}");
        let e = CollectionSettings::from_body(&d, &json!({"shingle": {"size": 3}}))
            .unwrap_err()
            .to_string();
        assert!(e.contains("size"), "{e}");
        let e = CollectionSettings::from_body(&d, &json!({"retention": {"ttl_secs": 0}}))
            .unwrap_err()
            .to_string();
        assert!(e.contains("retention.ttl_secs"), "{e}");
    }

    #[test]
    fn whole_floats_are_integers_as_json_schema_says() {
        let d = CollectionSettings::default();
        let body = json!({"shingle": {"k": 5.0}, "index": {"num_perm": 64.0}, "retention": {"ttl_secs": 60.0}});
        let (s, _) = CollectionSettings::from_body(&d, &body).unwrap();
        assert_eq!(
            (s.shingle.k, s.index.num_perm, s.retention.ttl_secs),
            (5, 64, Some(60))
        );
        let e = CollectionSettings::from_body(&d, &json!({"shingle": {"k": 5.5}})).unwrap_err();
        assert!(e.to_string().contains("5.5"), "{e}");
        let mut v = json!([-1.0, 1e300, 0.0, 3]);
        integral_floats_to_integers(&mut v);
        assert_eq!(v, json!([-1.0, 1e300, 0, 3]));
    }

    #[test]
    fn the_events_section_overrides_key_by_key_and_names_a_bad_key() {
        use crate::engine::{Measure, Score};
        let d = CollectionSettings::default();
        let body = json!({"events": {"feed": true, "threshold": 0.8}});
        let (s, _) = CollectionSettings::from_body(&d, &body).unwrap();
        assert_eq!(
            s.events,
            EventFeed {
                feed: true,
                measure: Measure::Jaccard,
                score: Score::Raw,
                threshold: Some(0.8)
            }
        );
        let patched = events_over(
            &s.events,
            &json!({"threshold": null, "measure": "containment"}),
        )
        .unwrap();
        assert_eq!(
            (patched.feed, patched.measure, patched.threshold),
            (true, Measure::Containment, None)
        );
        for (events, key) in [
            (json!({"measure": "cosine"}), "events.measure"),
            (json!({"score": 1}), "events.score"),
            (json!({"threshold": "0.8"}), "events.threshold"),
            (json!({"threshold": 0.01}), "events.threshold"),
            (json!({"score": "content"}), "events.score"),
            (json!({"feed": null}), "events.feed"),
            (json!({"extra": true}), "events.extra"),
            (json!(true), "events"),
        ] {
            let e = CollectionSettings::from_body(&d, &json!({ "events": events }))
                .unwrap_err()
                .to_string();
            assert!(e.contains(key), "{events}: {e}");
        }
        let (key, _, _) = d.first_difference(&s).unwrap();
        assert_eq!(key, "events.feed");
    }

    #[test]
    fn the_review_section_overrides_key_by_key_and_names_a_bad_key() {
        let d = CollectionSettings::default();
        assert_eq!(d.review, Review::default());
        let body = json!({"review": {"exclude_not_duplicates": true}});
        let (s, _) = CollectionSettings::from_body(&d, &body).unwrap();
        assert!(s.review.exclude_not_duplicates);
        assert_eq!(s.review.snippet_field, None);
        let patched = review_over(&s.review, &json!({"snippet_field": "titre"})).unwrap();
        assert_eq!(
            patched,
            Review {
                exclude_not_duplicates: true,
                snippet_field: Some("titre".into())
            }
        );
        let cleared = review_over(&patched, &json!({"snippet_field": null})).unwrap();
        assert_eq!(cleared.snippet_field, None);
        for (review, key) in [
            (
                json!({"exclude_not_duplicates": "yes"}),
                "review.exclude_not_duplicates",
            ),
            (
                json!({"exclude_not_duplicates": null}),
                "review.exclude_not_duplicates",
            ),
            (json!({"snippet_field": ""}), "review.snippet_field"),
            (
                json!({"snippet_field": "ж".repeat(129)}),
                "review.snippet_field",
            ),
            (json!({"snippet_field": 3}), "review.snippet_field"),
            (json!({"extra": true}), "review.extra"),
            (json!([]), "review"),
        ] {
            let e = CollectionSettings::from_body(&d, &json!({ "review": review }))
                .unwrap_err()
                .to_string();
            assert!(e.contains(key), "{review}: {e}");
        }
        // A 256-byte name is the longest.
        let long = review_over(&d.review, &json!({"snippet_field": "é".repeat(128)})).unwrap();
        assert_eq!(long.snippet_field.unwrap().len(), 256);
        let (key, _, _) = d.first_difference(&s).unwrap();
        assert_eq!(key, "review.exclude_not_duplicates");
    }

    #[test]
    fn the_first_difference_is_named_in_a_fixed_order() {
        let a = CollectionSettings::default();
        let mut b = a.clone();
        b.index.seed = 7;
        b.retention.ttl_secs = Some(60);
        let (key, x, y) = a.first_difference(&b).unwrap();
        assert_eq!((key.as_str(), x, y), ("index.seed", json!(1), json!(7)));
        assert!(a.first_difference(&a).is_none());
    }
}
