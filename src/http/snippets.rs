//! `POST /snippets`: what each of a list of documents is, in a line: the
//! first words of its stored text and a title from its metadata, for the
//! lists of the console (search results, groups, pairs, the review queue)
//! and any client that shows ids to a person. A read (read-only keys may
//! call it); the ids travel in the body because a page lists up to 200.
//!
//! The words are the recipe's (see `text::snippet`): runs between spaces,
//! and in the recipe's version 2 each Han, kana or Thai character, so a
//! snippet of a Chinese text is its first characters; the text is the
//! stored one as posted (a slice of it, nothing normalized or escaped), to
//! be shown as plain text.

use super::error::ApiError;
use super::extract::{parse_json, Coll, JsonBody};
use super::state::backend;
use crate::backend::Excerpt;
use crate::collections::{Collection, Recipe};
use crate::text::snippet::{cut_chars, window_bytes};
use axum::Json;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Most ids a request may ask for (a page of a list).
pub const MAX_IDS: usize = 200;
/// Most words a snippet may ask for.
pub const MAX_WORDS: usize = 200;
/// Words of a snippet when the request does not say.
pub const DEFAULT_WORDS: usize = 40;
/// Characters of a metadata field name at most (what a field of a filter
/// takes too, counted in characters here).
const MAX_FIELD_CHARS: usize = 256;
/// Characters of a title kept (cut on a grapheme boundary).
const TITLE_CHARS: usize = 300;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SnippetsIn {
    pub ids: Vec<String>,
    #[serde(default, deserialize_with = "super::dto::integral_count")]
    pub words: Option<usize>,
    /// The metadata field whose string value is the title (default: the
    /// collection's [`default_snippet_field`]).
    #[serde(default)]
    pub field: Option<String>,
}

#[derive(Debug, Serialize)]
pub struct SnippetsOut {
    /// By id; an id with no live document is absent.
    pub snippets: BTreeMap<String, SnippetOut>,
}

#[derive(Debug, Serialize, PartialEq, Eq)]
pub struct SnippetOut {
    /// The first words of the stored text as posted; null when the
    /// collection keeps no text of the document.
    pub text: Option<String>,
    /// The string value of the metadata field asked for; null when the
    /// document has no such field or it is not a string.
    pub title: Option<String>,
    /// Whether the stored text goes on after `text`.
    pub truncated: bool,
}

/// The metadata field a collection's snippets take their title from when
/// a request names none.
///
/// The collection's `review.snippet_field`: the metadata field a title
/// is read from when the request names none.
pub(super) fn default_snippet_field(coll: &Collection) -> Option<String> {
    coll.review().snippet_field
}

/// `POST /snippets`.
pub async fn snippets(Coll(coll): Coll, body: JsonBody) -> Result<Json<SnippetsOut>, ApiError> {
    let req: SnippetsIn = parse_json(&body.0)?;
    if req.ids.is_empty() || req.ids.len() > MAX_IDS {
        return Err(ApiError::InvalidBody(format!(
            "ids must list 1 to {MAX_IDS} document ids (it has {})",
            req.ids.len()
        )));
    }
    if let Some(i) = req.ids.iter().position(String::is_empty) {
        return Err(ApiError::InvalidBody(format!(
            "ids[{i}] is empty: a document id has 1 to 256 bytes"
        )));
    }
    let words = req.words.unwrap_or(DEFAULT_WORDS);
    if !(1..=MAX_WORDS).contains(&words) {
        return Err(ApiError::InvalidBody(format!(
            "words must be 1 to {MAX_WORDS} (it is {words})"
        )));
    }
    if let Some(f) = &req.field {
        let n = f.chars().count();
        if n == 0 || n > MAX_FIELD_CHARS {
            return Err(ApiError::InvalidBody(format!(
                "field must name a metadata field of 1 to {MAX_FIELD_CHARS} characters"
            )));
        }
    }
    let field = req.field.or_else(|| default_snippet_field(&coll));
    let ids: Vec<&str> = req.ids.iter().map(String::as_str).collect();
    let snippets = snippets_of(&coll, &ids, words, field).await?;
    Ok(Json(SnippetsOut { snippets }))
}

/// The snippets of `ids` (their first `words` words, the title from the
/// metadata field `field`), as `POST /snippets` gives them; an id not
/// stored is absent. Shared with the review queue's page.
pub(super) async fn snippets_of(
    coll: &Collection,
    ids: &[&str],
    words: usize,
    field: Option<String>,
) -> Result<BTreeMap<String, SnippetOut>, ApiError> {
    let excerpts = backend(coll)?.excerpts(ids, window_bytes(words)).await?;
    let found: Vec<(String, Excerpt)> = ids
        .iter()
        .zip(excerpts)
        .filter_map(|(id, e)| e.map(|e| ((*id).to_owned(), e)))
        .collect();
    let recipe = coll.recipe().clone();
    tokio::task::spawn_blocking(move || {
        found
            .into_iter()
            .map(|(id, e)| {
                let snippet = snippet_of(&recipe, &e, words, field.as_deref());
                (id, snippet)
            })
            .collect()
    })
    .await
    .map_err(|e| ApiError::Internal(format!("snippets task failed: {e}")))
}

fn snippet_of(recipe: &Recipe, e: &Excerpt, words: usize, field: Option<&str>) -> SnippetOut {
    let (text, truncated) = match &e.text {
        Some(t) => {
            let s = recipe.snippet(t, words, e.text_cut);
            (Some(s.text.to_owned()), s.truncated)
        }
        None => (None, false),
    };
    let title = field.and_then(|f| title_of(e.metadata.as_deref()?, f));
    SnippetOut {
        text,
        title,
        truncated,
    }
}

/// The string value of the top-level field `field` of `metadata` (a JSON
/// object as stored), its first [`TITLE_CHARS`] characters.
fn title_of(metadata: &str, field: &str) -> Option<String> {
    let object: serde_json::Map<String, serde_json::Value> = serde_json::from_str(metadata).ok()?;
    let value = object.get(field)?.as_str()?;
    Some(cut_chars(value, TITLE_CHARS).0.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_title_is_a_string_field_of_the_metadata_only() {
        let m = r#"{"title":"Émile Zola — « J’accuse…! »","n":5,"t":null,"o":{"title":"x"}}"#;
        assert_eq!(
            title_of(m, "title").as_deref(),
            Some("Émile Zola — « J’accuse…! »")
        );
        assert_eq!(title_of(m, "n"), None);
        assert_eq!(title_of(m, "t"), None);
        assert_eq!(title_of(m, "o"), None);
        assert_eq!(title_of(m, "missing"), None);
        let long = format!(r#"{{"title":"{}"}}"#, "я".repeat(1000));
        assert_eq!(
            title_of(&long, "title").unwrap().chars().count(),
            TITLE_CHARS
        );
    }
}
