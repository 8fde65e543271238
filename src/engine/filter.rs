//! Metadata filters: which stored documents a query or scan may answer
//! with, decided from their top-level metadata fields.
//!
//! A [`FilterSpec`] is what a request asks for, checked once at the edge
//! ([`FilterSpec::parse`]): `filter`, conditions on top-level fields (a
//! value, or one of a list of values; all must hold), and `exclude_same`,
//! fields a candidate must not share with the query document. A
//! [`MetaFilter`] is that spec resolved against one query document (its
//! values of the `exclude_same` fields), the form every verifier checks.
//!
//! **Semantics.** Values are JSON strings, numbers or booleans. Strings
//! compare exactly (case-sensitive), numbers numerically (`1` equals
//! `1.0`; two integers compare exactly), a boolean equals only a boolean,
//! and values of different kinds are never equal (`"1"` ≠ `1`). A document
//! without metadata, whose metadata is not an object, or without the field
//! (or with `null`, an object or an array there) satisfies no condition on
//! it, and is never excluded by it: an exclusion needs both documents to
//! have the field with equal values. A pair of a scan is admitted when both
//! documents satisfy every condition and no `exclude_same` field excludes
//! one by the other.
//!
//! **Cost.** A candidate's metadata is read once, by a scanner ([`scan`])
//! that decodes only the fields the filter names (borrowed from the stored
//! text when they have no escapes), skips every other value without
//! parsing it, and stops once it has every field.

use std::borrow::Cow;
use std::sync::Arc;

/// Most fields in `filter`, and most in `exclude_same`.
pub const MAX_FILTER_FIELDS: usize = 32;
/// Most values in one "one of" list.
pub const MAX_FILTER_VALUES: usize = 256;
/// Longest field name, in bytes.
pub const MAX_FIELD_BYTES: usize = 256;

/// A number as JSON gave it: integers kept exact, others as `f64`.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Number {
    Int(i128),
    Float(f64),
}

impl Number {
    fn equals(self, other: Number) -> bool {
        match (self, other) {
            (Number::Int(a), Number::Int(b)) => a == b,
            (a, b) => a.as_f64() == b.as_f64(),
        }
    }

    fn as_f64(self) -> f64 {
        match self {
            Number::Int(i) => i as f64,
            Number::Float(f) => f,
        }
    }
}

/// A scalar value of a condition, or of the query document's field.
#[derive(Clone, Debug, PartialEq)]
enum Scalar {
    Str(Box<str>),
    Num(Number),
    Bool(bool),
}

/// A scalar read from a candidate's metadata (borrowed when it can be).
#[derive(Clone, Debug, PartialEq)]
enum ScalarRef<'a> {
    Str(Cow<'a, str>),
    Num(Number),
    Bool(bool),
}

impl ScalarRef<'_> {
    /// The semantics' equality between two read values.
    fn same_as(&self, other: &ScalarRef<'_>) -> bool {
        match (self, other) {
            (ScalarRef::Str(a), ScalarRef::Str(b)) => **a == **b,
            (ScalarRef::Num(a), ScalarRef::Num(b)) => a.equals(*b),
            (ScalarRef::Bool(a), ScalarRef::Bool(b)) => a == b,
            _ => false,
        }
    }
}

impl Scalar {
    fn equals(&self, v: &ScalarRef<'_>) -> bool {
        self.borrowed().same_as(v)
    }

    /// This value as a read one (borrowing its string).
    fn borrowed(&self) -> ScalarRef<'_> {
        match self {
            Scalar::Str(s) => ScalarRef::Str(Cow::Borrowed(s)),
            Scalar::Num(n) => ScalarRef::Num(*n),
            Scalar::Bool(b) => ScalarRef::Bool(*b),
        }
    }

    fn of(v: ScalarRef<'_>) -> Self {
        match v {
            ScalarRef::Str(s) => Scalar::Str(s.into()),
            ScalarRef::Num(n) => Scalar::Num(n),
            ScalarRef::Bool(b) => Scalar::Bool(b),
        }
    }

    fn from_json(v: &serde_json::Value) -> Option<Self> {
        match v {
            serde_json::Value::String(s) => Some(Scalar::Str(s.as_str().into())),
            serde_json::Value::Bool(b) => Some(Scalar::Bool(*b)),
            serde_json::Value::Number(n) => Some(Scalar::Num(number_of(n))),
            _ => None,
        }
    }
}

fn number_of(n: &serde_json::Number) -> Number {
    if let Some(i) = n.as_i64() {
        Number::Int(i.into())
    } else if let Some(u) = n.as_u64() {
        Number::Int(u.into())
    } else {
        Number::Float(n.as_f64().unwrap_or(f64::NAN))
    }
}

/// One condition: the field's value is one of `values`.
#[derive(Clone, Debug, PartialEq)]
struct Condition {
    /// Index of the field in [`FilterSpec::fields`].
    field: usize,
    /// The strings first, sorted and without repeats (a one-of of many
    /// sites is a binary search), then the numbers and booleans.
    values: Vec<Scalar>,
    /// How many of `values` are strings.
    strings: usize,
}

impl Condition {
    fn new(field: usize, mut values: Vec<Scalar>) -> Self {
        values.sort_by(|a, b| match (a, b) {
            (Scalar::Str(x), Scalar::Str(y)) => x.cmp(y),
            (Scalar::Str(_), _) => std::cmp::Ordering::Less,
            (_, Scalar::Str(_)) => std::cmp::Ordering::Greater,
            _ => std::cmp::Ordering::Equal,
        });
        values.dedup();
        let strings = values
            .iter()
            .take_while(|v| matches!(v, Scalar::Str(_)))
            .count();
        Self {
            field,
            values,
            strings,
        }
    }

    /// Whether the read value `v` is one of the condition's values.
    #[inline]
    fn matches(&self, v: &ScalarRef<'_>) -> bool {
        match v {
            ScalarRef::Str(s) => {
                let strings = &self.values[..self.strings];
                let is = |x: &Scalar| matches!(x, Scalar::Str(x) if **x == **s);
                if strings.len() <= 8 {
                    strings.iter().any(is)
                } else {
                    strings
                        .binary_search_by(|x| match x {
                            Scalar::Str(x) => (**x).cmp(&**s),
                            _ => std::cmp::Ordering::Greater,
                        })
                        .is_ok()
                }
            }
            _ => self.values[self.strings..].iter().any(|x| x.equals(v)),
        }
    }
}

/// A request's `filter` and `exclude_same`, checked. Conditions are kept
/// in field order, so two requests that differ only in the order of their
/// keys are the same spec (one cached scan).
#[derive(Clone, Debug, PartialEq)]
pub struct FilterSpec {
    /// Every field named, conditions' and exclusions', each once, sorted.
    fields: Vec<Box<str>>,
    conditions: Vec<Condition>,
    /// Indexes in `fields` of the `exclude_same` fields.
    exclude_same: Vec<usize>,
}

/// Why a `filter` or `exclude_same` was refused; the message names the
/// parameter and the field.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[error("{0}")]
pub struct FilterError(pub String);

fn check_name(param: &str, name: &str) -> Result<(), FilterError> {
    if name.is_empty() || name.len() > MAX_FIELD_BYTES {
        let shown: String = name.chars().take(40).collect();
        return Err(FilterError(format!(
            "{param}: field names are 1 to {MAX_FIELD_BYTES} bytes, got {} bytes ({shown:?}…)",
            name.len()
        )));
    }
    Ok(())
}

impl FilterSpec {
    /// Check a request's `filter` (a JSON object: field → a string,
    /// number or boolean, or a non-empty array of them) and `exclude_same`
    /// (field names). `None` when neither asks for anything.
    pub fn parse(
        filter: Option<&serde_json::Value>,
        exclude_same: &[String],
    ) -> Result<Option<Self>, FilterError> {
        let object = match filter {
            None | Some(serde_json::Value::Null) => None,
            Some(serde_json::Value::Object(m)) => Some(m),
            Some(other) => {
                return Err(FilterError(format!(
                    "filter must be a JSON object of field → value(s), not {}",
                    kind(other)
                )))
            }
        };
        let mut named: Vec<(Box<str>, Option<Vec<Scalar>>)> = Vec::new();
        if let Some(object) = object {
            if object.len() > MAX_FILTER_FIELDS {
                return Err(FilterError(format!(
                    "filter has {} fields; the limit is {MAX_FILTER_FIELDS}",
                    object.len()
                )));
            }
            for (name, value) in object {
                check_name("filter", name)?;
                let shape = || {
                    FilterError(format!(
                        "filter.{name}: values must be strings, numbers or booleans or an array of them, not {}",
                        kind(value)
                    ))
                };
                let values = match value {
                    serde_json::Value::Array(items) => {
                        if items.is_empty() {
                            return Err(FilterError(format!(
                                "filter.{name}: an array of values (one of) must not be empty"
                            )));
                        }
                        if items.len() > MAX_FILTER_VALUES {
                            return Err(FilterError(format!(
                                "filter.{name}: {} values; the limit is {MAX_FILTER_VALUES}",
                                items.len()
                            )));
                        }
                        items
                            .iter()
                            .map(|v| {
                                Scalar::from_json(v).ok_or_else(|| {
                                    FilterError(format!(
                                        "filter.{name}: values must be strings, numbers or booleans or an array of them; the array holds {}",
                                        kind(v)
                                    ))
                                })
                            })
                            .collect::<Result<Vec<_>, _>>()?
                    }
                    v => vec![Scalar::from_json(v).ok_or_else(shape)?],
                };
                named.push((name.as_str().into(), Some(values)));
            }
        }
        if exclude_same.len() > MAX_FILTER_FIELDS {
            return Err(FilterError(format!(
                "exclude_same names {} fields; the limit is {MAX_FILTER_FIELDS}",
                exclude_same.len()
            )));
        }
        for name in exclude_same {
            check_name("exclude_same", name)?;
        }
        if named.is_empty() && exclude_same.is_empty() {
            return Ok(None);
        }
        let mut fields: Vec<Box<str>> = named
            .iter()
            .map(|(n, _)| n.clone())
            .chain(exclude_same.iter().map(|n| n.as_str().into()))
            .collect();
        fields.sort_unstable();
        fields.dedup();
        let index = |name: &str| fields.binary_search_by(|f| (**f).cmp(name)).expect("named");
        let mut conditions: Vec<Condition> = named
            .into_iter()
            .filter_map(|(name, values)| values.map(|values| Condition::new(index(&name), values)))
            .collect();
        conditions.sort_by_key(|c| c.field);
        let mut excluded: Vec<usize> = exclude_same.iter().map(|n| index(n)).collect();
        excluded.sort_unstable();
        excluded.dedup();
        Ok(Some(Self {
            fields,
            conditions,
            exclude_same: excluded,
        }))
    }

    /// Whether it names `exclude_same` fields (then it needs the query
    /// document: [`Self::about`]).
    pub fn excludes(&self) -> bool {
        !self.exclude_same.is_empty()
    }

    /// The spec resolved against the query document whose metadata (JSON
    /// text) is `query`: its values of the `exclude_same` fields.
    pub fn about(self: &Arc<Self>, query: Option<&str>) -> MetaFilter {
        let same = if self.excludes() {
            let values = self.read(query);
            self.exclude_same
                .iter()
                .map(|&i| values[i].clone().map(Scalar::of))
                .collect()
        } else {
            Vec::new()
        };
        MetaFilter {
            spec: Arc::clone(self),
            same,
        }
    }

    /// The filter's fields in `metadata` (`None` where absent or not a
    /// scalar), in the order of [`Self::fields`].
    fn read<'a>(&self, metadata: Option<&'a str>) -> Vec<Option<ScalarRef<'a>>> {
        self.with_values(metadata, |values| values.to_vec())
    }

    /// `f` of the filter's fields in `metadata` ([`Self::read`]'s values),
    /// read into a buffer on the stack when the filter names few fields:
    /// this runs once per candidate of a filtered query.
    #[inline]
    fn with_values<'a, R>(
        &self,
        metadata: Option<&'a str>,
        f: impl FnOnce(&[Option<ScalarRef<'a>>]) -> R,
    ) -> R {
        const ON_STACK: usize = 8;
        let n = self.fields.len();
        let fill = |out: &mut [Option<ScalarRef<'a>>]| {
            if let Some(text) = metadata {
                if !scan(text, &self.fields, out) {
                    // Unreadable (never stored so): no metadata.
                    out.iter_mut().for_each(|v| *v = None);
                }
            }
        };
        if n <= ON_STACK {
            let mut buf: [Option<ScalarRef<'a>>; ON_STACK] = Default::default();
            fill(&mut buf[..n]);
            f(&buf[..n])
        } else {
            let mut buf = vec![None; n];
            fill(&mut buf);
            f(&buf)
        }
    }

    /// Whether `values` (read by [`Self::read`]) satisfy every condition.
    fn holds(&self, values: &[Option<ScalarRef<'_>>]) -> bool {
        self.conditions
            .iter()
            .all(|c| values[c.field].as_ref().is_some_and(|v| c.matches(v)))
    }

    /// Whether the documents with metadata `a` and `b` may be a pair of a
    /// scan: both satisfy every condition and share no `exclude_same` value.
    pub fn admits_pair(&self, a: Option<&str>, b: Option<&str>) -> bool {
        self.with_values(a, |va| {
            self.holds(va)
                && self.with_values(b, |vb| {
                    self.holds(vb)
                        && !self.exclude_same.iter().any(|&i| match (&va[i], &vb[i]) {
                            (Some(x), Some(y)) => x.same_as(y),
                            _ => false,
                        })
                })
        })
    }

    /// Whether a document with metadata `metadata` satisfies every
    /// condition (exclusions aside).
    pub fn holds_for(&self, metadata: Option<&str>) -> bool {
        self.conditions.is_empty() || self.with_values(metadata, |values| self.holds(values))
    }
}

/// A [`FilterSpec`] resolved against one query document: what a query's
/// verifier asks of each candidate.
#[derive(Clone, Debug, PartialEq)]
pub struct MetaFilter {
    spec: Arc<FilterSpec>,
    /// The query document's value of each `exclude_same` field (in the
    /// spec's order); `None` excludes nothing.
    same: Vec<Option<Scalar>>,
}

impl MetaFilter {
    pub fn spec(&self) -> &Arc<FilterSpec> {
        &self.spec
    }

    /// Whether a candidate whose metadata (JSON text) is `metadata` may be
    /// a match: it satisfies every condition, and has no `exclude_same`
    /// field equal to the query document's.
    pub fn admits(&self, metadata: Option<&str>) -> bool {
        let spec = &*self.spec;
        spec.with_values(metadata, |values| {
            spec.holds(values)
                && !spec
                    .exclude_same
                    .iter()
                    .zip(&self.same)
                    .any(|(&i, q)| match (q, &values[i]) {
                        (Some(q), Some(v)) => q.equals(v),
                        _ => false,
                    })
        })
    }
}

fn kind(v: &serde_json::Value) -> &'static str {
    match v {
        serde_json::Value::Null => "null",
        serde_json::Value::Bool(_) => "a boolean",
        serde_json::Value::Number(_) => "a number",
        serde_json::Value::String(_) => "a string",
        serde_json::Value::Array(_) => "an array",
        serde_json::Value::Object(_) => "an object",
    }
}

/// Reads `fields` from the top-level object of `text` into `out` (`None`
/// where absent, `null`, an object or an array), and stops at the first
/// occurrence of the last of them: a repeated key counts as its first
/// value, and the text after the last field wanted is never read. False if
/// the text is not a well-formed object as far as it was read.
///
/// A scanner of its own rather than serde_json's: stored metadata was
/// checked as JSON when written, so values that are not wanted are only
/// skipped (strings to their closing quote, objects and arrays to their
/// matching bracket), never parsed, which is ~3× cheaper per candidate in
/// `examples/filter_bench.rs`. A wanted value, and a key with an escape,
/// are decoded by serde_json.
fn scan<'a>(text: &'a str, fields: &[Box<str>], out: &mut [Option<ScalarRef<'a>>]) -> bool {
    let b = text.as_bytes();
    let mut i = skip_ws(b, 0);
    if b.get(i) != Some(&b'{') {
        // Not an object: no fields (and nothing else to say).
        return true;
    }
    // At most 64 fields (32 conditions, 32 exclusions): one bit each.
    let (mut seen, mut missing) = (0u64, fields.len());
    i += 1;
    loop {
        i = skip_ws(b, i);
        match b.get(i) {
            Some(b'}') => return true,
            Some(b'"') => {}
            _ => return false,
        }
        let Some((key_end, escaped)) = string_end_escaped(b, i) else {
            return false;
        };
        let raw = &text[i + 1..key_end - 1];
        let key: Cow<'_, str> = if escaped {
            match serde_json::from_str::<String>(&text[i..key_end]) {
                Ok(k) => Cow::Owned(k),
                Err(_) => return false,
            }
        } else {
            Cow::Borrowed(raw)
        };
        i = skip_ws(b, key_end);
        if b.get(i) != Some(&b':') {
            return false;
        }
        i = skip_ws(b, i + 1);
        let Some(value_end) = value_end(b, i) else {
            return false;
        };
        if let Some(f) = field_index(fields, &key) {
            if seen & (1 << f) == 0 {
                seen |= 1 << f;
                out[f] = scalar(&text[i..value_end]);
                missing -= 1;
                if missing == 0 {
                    return true;
                }
            }
        }
        i = skip_ws(b, value_end);
        match b.get(i) {
            Some(b',') => i += 1,
            Some(b'}') => return true,
            _ => return false,
        }
    }
}

fn skip_ws(b: &[u8], mut i: usize) -> usize {
    while matches!(b.get(i), Some(b' ' | b'\t' | b'\n' | b'\r')) {
        i += 1;
    }
    i
}

/// Where `key` is in the sorted `fields`: compared by length first, which
/// rules out most keys without reading them.
#[inline]
fn field_index(fields: &[Box<str>], key: &str) -> Option<usize> {
    if fields.len() <= 8 {
        fields
            .iter()
            .position(|f| f.len() == key.len() && **f == *key)
    } else {
        fields.binary_search_by(|x| (**x).cmp(key)).ok()
    }
}

/// The index after the closing quote of the string opening at `i`.
#[inline]
fn string_end(b: &[u8], i: usize) -> Option<usize> {
    string_end_escaped(b, i).map(|(end, _)| end)
}

/// [`string_end`], and whether the string holds an escape.
#[inline]
fn string_end_escaped(b: &[u8], i: usize) -> Option<(usize, bool)> {
    let mut escaped = false;
    let mut j = i + 1;
    loop {
        j = quote_or_backslash(b, j)?;
        if b[j] == b'"' {
            return Some((j + 1, escaped));
        }
        escaped = true;
        j += 2;
    }
}

/// The first `"` or `\\` at or after `from`, eight bytes at a time (most
/// strings of metadata are short, but a title or a tag list is not).
#[inline]
fn quote_or_backslash(b: &[u8], from: usize) -> Option<usize> {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    let zero_byte = |v: u64| v.wrapping_sub(ONES) & !v & HIGH;
    let mut j = from;
    while let Some(chunk) = b.get(j..j + 8) {
        let w = u64::from_le_bytes(chunk.try_into().expect("8 bytes"));
        // The lowest flagged byte is exact (a false flag can only sit
        // above a true one).
        let hit =
            zero_byte(w ^ (ONES * u64::from(b'"'))) | zero_byte(w ^ (ONES * u64::from(b'\\')));
        if hit != 0 {
            return Some(j + (hit.trailing_zeros() / 8) as usize);
        }
        j += 8;
    }
    b.get(j..)?
        .iter()
        .position(|&c| c == b'"' || c == b'\\')
        .map(|k| j + k)
}

/// The index after the value starting at `i`.
fn value_end(b: &[u8], i: usize) -> Option<usize> {
    match b.get(i)? {
        b'"' => string_end(b, i),
        b'{' | b'[' => {
            let (mut depth, mut j) = (0usize, i);
            loop {
                match b.get(j)? {
                    b'"' => {
                        j = string_end(b, j)?;
                        continue;
                    }
                    b'{' | b'[' => depth += 1,
                    b'}' | b']' => {
                        depth -= 1;
                        if depth == 0 {
                            return Some(j + 1);
                        }
                    }
                    _ => {}
                }
                j += 1;
            }
        }
        _ => {
            let mut j = i;
            while j < b.len() && !matches!(b[j], b',' | b'}' | b']' | b' ' | b'\t' | b'\n' | b'\r')
            {
                j += 1;
            }
            (j > i).then_some(j)
        }
    }
}

/// A wanted value: a scalar, or `None` (null, an object, an array, or
/// anything unreadable).
fn scalar(raw: &str) -> Option<ScalarRef<'_>> {
    match raw.as_bytes().first()? {
        b'"' => {
            let inner = &raw[1..raw.len() - 1];
            if inner.contains('\\') {
                serde_json::from_str::<String>(raw)
                    .ok()
                    .map(|s| ScalarRef::Str(Cow::Owned(s)))
            } else {
                Some(ScalarRef::Str(Cow::Borrowed(inner)))
            }
        }
        b't' => (raw == "true").then_some(ScalarRef::Bool(true)),
        b'f' => (raw == "false").then_some(ScalarRef::Bool(false)),
        b'n' | b'{' | b'[' => None,
        _ if is_small_integer(raw) => raw
            .parse::<i64>()
            .ok()
            .map(|i| ScalarRef::Num(Number::Int(i.into()))),
        _ => serde_json::from_str::<serde_json::Number>(raw)
            .ok()
            .map(|n| ScalarRef::Num(number_of(&n))),
    }
}

/// An integer of at most 18 digits (no fraction, no exponent): it fits an
/// `i64`, read without serde_json's number parser.
#[inline]
fn is_small_integer(raw: &str) -> bool {
    let digits = raw.strip_prefix('-').unwrap_or(raw).as_bytes();
    !digits.is_empty() && digits.len() <= 18 && digits.iter().all(u8::is_ascii_digit)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn spec(filter: serde_json::Value, exclude: &[&str]) -> Arc<FilterSpec> {
        let exclude: Vec<String> = exclude.iter().map(|s| s.to_string()).collect();
        Arc::new(FilterSpec::parse(Some(&filter), &exclude).unwrap().unwrap())
    }

    fn admits(filter: serde_json::Value, meta: Option<&str>) -> bool {
        spec(filter, &[]).about(None).admits(meta)
    }

    #[test]
    fn strings_compare_exactly_and_never_equal_numbers() {
        let f = json!({"site": "le-monde.fr"});
        assert!(admits(f.clone(), Some(r#"{"site":"le-monde.fr"}"#)));
        assert!(!admits(f.clone(), Some(r#"{"site":"Le-Monde.fr"}"#)));
        assert!(admits(
            json!({"auteur": "Zoë “Ż” Müller"}),
            Some(r#"{"auteur":"Zo\u00eb \u201c\u017b\u201d M\u00fcller"}"#)
        ));
        assert!(!admits(json!({"n": "1"}), Some(r#"{"n":1}"#)));
        assert!(!admits(json!({"n": 1}), Some(r#"{"n":"1"}"#)));
    }

    #[test]
    fn numbers_compare_numerically_and_integers_exactly() {
        assert!(admits(json!({"views": 1}), Some(r#"{"views":1.0}"#)));
        assert!(admits(json!({"views": 1.0}), Some(r#"{"views":1}"#)));
        assert!(admits(json!({"views": 2.5}), Some(r#"{"views":25e-1}"#)));
        assert!(!admits(json!({"views": 1}), Some(r#"{"views":2}"#)));
        assert!(admits(
            json!({"big": u64::MAX}),
            Some(&format!(r#"{{"big":{}}}"#, u64::MAX))
        ));
        assert!(!admits(
            json!({"big": 9007199254740993u64}),
            Some(r#"{"big":9007199254740992}"#)
        ));
        assert!(admits(json!({"neg": -3}), Some(r#"{"neg":-3}"#)));
    }

    #[test]
    fn a_boolean_equals_only_a_boolean() {
        assert!(admits(json!({"draft": false}), Some(r#"{"draft":false}"#)));
        assert!(!admits(json!({"draft": false}), Some(r#"{"draft":0}"#)));
        assert!(!admits(
            json!({"draft": false}),
            Some(r#"{"draft":"false"}"#)
        ));
        assert!(!admits(json!({"draft": true}), Some(r#"{"draft":false}"#)));
    }

    #[test]
    fn absent_null_nested_or_no_metadata_satisfies_no_condition() {
        let f = json!({"site": "a"});
        for meta in [
            None,
            Some(r#"{}"#),
            Some(r#"{"other":"a"}"#),
            Some(r#"{"site":null}"#),
            Some(r#"{"site":["a"]}"#),
            Some(r#"{"site":{"a":1}}"#),
            Some(r#"["site","a"]"#),
            Some(r#""a""#),
            Some("not json"),
        ] {
            assert!(!admits(f.clone(), meta), "{meta:?}");
        }
    }

    #[test]
    fn one_of_and_every_condition() {
        let f = json!({"site": ["a", "b"], "views": [1, 2], "draft": false});
        assert!(admits(
            f.clone(),
            Some(r#"{"site":"b","views":2,"draft":false,"x":[{"y":1}]}"#)
        ));
        assert!(!admits(
            f.clone(),
            Some(r#"{"site":"c","views":2,"draft":false}"#)
        ));
        assert!(!admits(
            f.clone(),
            Some(r#"{"site":"a","views":3,"draft":false}"#)
        ));
        assert!(!admits(f, Some(r#"{"site":"a","views":1}"#)));
    }

    #[test]
    fn a_long_one_of_mixing_kinds_matches_each_value_and_nothing_else() {
        // Over 8 strings: the binary search; the number and the boolean
        // after them; repeats and order do not matter.
        let mut values: Vec<serde_json::Value> =
            (0..40).rev().map(|i| json!(format!("site-{i}"))).collect();
        values.extend([json!(7), json!(true), json!("site-3"), json!(7.0)]);
        let f = json!({ "v": values });
        for i in 0..40 {
            let meta = format!(r#"{{"v":"site-{i}"}}"#);
            assert!(admits(f.clone(), Some(&meta)), "{meta}");
        }
        for yes in [r#"{"v":7}"#, r#"{"v":7.0}"#, r#"{"v":true}"#] {
            assert!(admits(f.clone(), Some(yes)), "{yes}");
        }
        for no in [
            r#"{"v":"site-40"}"#,
            r#"{"v":"site-"}"#,
            r#"{"v":"7"}"#,
            r#"{"v":8}"#,
            r#"{"v":false}"#,
            r#"{"v":"Site-1"}"#,
        ] {
            assert!(!admits(f.clone(), Some(no)), "{no}");
        }
        assert_eq!(
            spec(json!({"v": ["b", "a", 1]}), &[]),
            spec(json!({"v": [1, "a", "b", "a"]}), &[])
        );
    }

    #[test]
    fn a_repeated_key_counts_as_its_first_value() {
        assert!(admits(json!({"s": "a"}), Some(r#"{"s":"a","s":"b"}"#)));
        assert!(!admits(json!({"s": "b"}), Some(r#"{"s":"a","s":"b"}"#)));
    }

    #[test]
    fn reading_stops_once_every_field_is_found() {
        // The text after the fields wanted is not read: a (never stored)
        // malformed tail does not matter, one before them does.
        let f = json!({"a": 1, "b": true});
        assert!(admits(
            f.clone(),
            Some(r#"{"b":true,"x":[{"y":null}],"a":1.0,"tail":"#)
        ));
        assert!(!admits(f, Some(r#"{"b":true,"x" [1],"a":1}"#)));
    }

    #[test]
    fn the_scanner_reads_what_serde_json_reads() {
        // Escapes in keys and values, whitespace everywhere, brackets and
        // quotes inside skipped strings, numbers of every form.
        let texts = [
            r#" { "\u0073ite" : "a\"b" , "skip" : ["}", {"x": "]\\"}], "views":-0.5e1 ,"draft":true}"#,
            "{\n\t\"site\":\"Zürich “x”\",\r\n\"views\":12,\"draft\":false }",
            r#"{"nested":{"site":"no"},"site":"yes","views":1E2,"draft":null}"#,
            r#"{"site":"\u00e9t\u00e9","views":18446744073709551615,"draft":[true]}"#,
            r#"{}"#,
        ];
        for text in texts {
            let v: serde_json::Value = serde_json::from_str(text).unwrap();
            for field in ["site", "views", "draft"] {
                let want = v.get(field).and_then(Scalar::from_json);
                let f = match &want {
                    Some(Scalar::Str(s)) => json!({ field: &**s }),
                    Some(Scalar::Bool(b)) => json!({ field: b }),
                    Some(Scalar::Num(_)) => json!({ field: v[field].clone() }),
                    None => json!({ field: [1, "x", true] }),
                };
                assert_eq!(admits(f, Some(text)), want.is_some(), "{text} {field}");
            }
        }
    }

    #[test]
    fn exclude_same_needs_both_values_equal() {
        let s = spec(json!({}), &["author"]);
        let q = s.about(Some(r#"{"author":"Анна"}"#));
        assert!(!q.admits(Some(r#"{"author":"Анна"}"#)));
        assert!(q.admits(Some(r#"{"author":"Борис"}"#)));
        assert!(q.admits(Some(r#"{}"#)));
        assert!(q.admits(None));
        let none = s.about(Some(r#"{"site":"x"}"#));
        assert!(none.admits(Some(r#"{"author":"Анна"}"#)));
        let num = s.about(Some(r#"{"author":7}"#));
        assert!(!num.admits(Some(r#"{"author":7.0}"#)));
        assert!(num.admits(Some(r#"{"author":"7"}"#)));
    }

    #[test]
    fn pairs_need_both_sides_to_pass_and_differ_on_excluded_fields() {
        let s = spec(json!({"lang": "fr"}), &["site"]);
        let a = Some(r#"{"lang":"fr","site":"x"}"#);
        let b = Some(r#"{"lang":"fr","site":"y"}"#);
        let c = Some(r#"{"lang":"fr","site":"x"}"#);
        let d = Some(r#"{"lang":"de","site":"y"}"#);
        assert!(s.admits_pair(a, b));
        assert!(!s.admits_pair(a, c));
        assert!(!s.admits_pair(a, d));
        assert!(!s.admits_pair(d, a));
        assert!(s.admits_pair(a, Some(r#"{"lang":"fr"}"#)));
    }

    #[test]
    fn key_order_does_not_change_the_spec() {
        assert_eq!(
            spec(json!({"a": 1, "b": [true, "x"]}), &["c", "a"]),
            spec(json!({"b": [true, "x"], "a": 1}), &["a", "c", "a"])
        );
    }

    #[test]
    fn bad_shapes_are_refused_naming_the_field() {
        let err = |f: serde_json::Value, ex: &[&str]| {
            let ex: Vec<String> = ex.iter().map(|s| s.to_string()).collect();
            FilterSpec::parse(Some(&f), &ex).unwrap_err().0
        };
        assert!(err(json!({"site": {"a": 1}}), &[]).starts_with("filter.site: values must be"));
        assert!(err(json!({"site": [["a"]]}), &[]).starts_with("filter.site: values must be"));
        assert!(err(json!({"site": null}), &[]).starts_with("filter.site:"));
        assert!(err(json!({"site": []}), &[]).contains("filter.site: an array"));
        assert!(err(json!(["site"]), &[]).starts_with("filter must be a JSON object"));
        assert!(err(json!({"": 1}), &[]).contains("field names are 1 to"));
        assert!(err(json!({}), &[""]).starts_with("exclude_same: field names"));
        let many: serde_json::Map<String, serde_json::Value> =
            (0..33).map(|i| (format!("f{i}"), json!(i))).collect();
        assert!(err(serde_json::Value::Object(many), &[]).contains("the limit is 32"));
        let values: Vec<u32> = (0..257).collect();
        assert!(err(json!({ "v": values }), &[]).contains("filter.v: 257 values"));
        let mut deep = json!(1);
        for _ in 0..100 {
            deep = json!([deep]);
        }
        assert!(err(json!({ "deep": deep }), &[]).starts_with("filter.deep:"));
        assert_eq!(FilterSpec::parse(Some(&json!({})), &[]), Ok(None));
        assert_eq!(FilterSpec::parse(None, &[]), Ok(None));
    }
}
