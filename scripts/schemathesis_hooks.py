"""Schemathesis hooks for scripts/schemathesis.sh (loaded via SCHEMATHESIS_HOOKS).

Two refusals in openapi.yaml depend on more than JSON Schema can say, so a
schema-valid ("positive") input may rightly be refused:

- a `threshold` in (0, index.min_query_threshold) is 400 `threshold-below-tuning`
  (the bound is derived from the index configuration, ~0.7627 by default);
- a `text` with nothing left after normalization (only punctuation or
  whitespace) is 422 `empty-text`;
- `PUT /documents/{id}` refuses a body `id` that differs from the path's
  (422 `invalid-body`); the optional body `id` is dropped;
- `GET /duplicates` accepts only a `cursor` it issued (the hex of a group's
  first id; random hex may not even be UTF-8); a generated one is dropped.

For positive test cases only, such values are replaced by accepted ones just
before the request is sent, so the
positive_data_acceptance check keeps testing everything else. Negative cases are
left untouched.
"""

import unicodedata

import schemathesis
from schemathesis import GenerationMode

# index.min_query_threshold with the default config (see GET /stats).
MIN_QUERY_THRESHOLD = 0.7627452899831924


def _is_positive(case) -> bool:
    meta = getattr(case, "meta", None)
    if meta is None:
        return True
    return meta.generation.mode == GenerationMode.POSITIVE


def _fix_threshold(container) -> None:
    value = container.get("threshold")
    if isinstance(value, bool):
        return
    if isinstance(value, str):  # query values may already be serialized
        try:
            number = float(value)
        except ValueError:
            return
        if 0 < number < MIN_QUERY_THRESHOLD:
            container["threshold"] = "0.8"
    elif isinstance(value, (int, float)) and 0 < value < MIN_QUERY_THRESHOLD:
        container["threshold"] = 0.8


def _empty_after_normalization(text: str) -> bool:
    return not any(ch.isalnum() or ch == "_" for ch in unicodedata.normalize("NFKC", text))


@schemathesis.hook
def before_call(context, case, kwargs):
    # `before_call` runs right before every request in every phase (examples
    # included, which `map_case` does not reach); schemathesis re-validates
    # the case's metadata after the edits.
    if not _is_positive(case):
        return
    if isinstance(case.query, dict):
        _fix_threshold(case.query)
        if case.path == "/duplicates":
            case.query.pop("cursor", None)
    if isinstance(case.body, dict):
        _fix_threshold(case.body)
        if case.method.upper() == "PUT":
            # The body id is optional; without it the path's id is used.
            case.body.pop("id", None)
        text = case.body.get("text")
        if isinstance(text, str) and _empty_after_normalization(text):
            case.body["text"] = text + " text"
