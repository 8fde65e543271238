"""Drive a neardup server through the Python client generated from its own
OpenAPI document (see scripts/client-check.sh). The server runs with
index.threshold = 0.9; no call below passes a threshold unless it means to.

Usage: PYTHONPATH=target/client-check python scripts/client_check.py BASE_URL
"""

import io
import json
import sys
from http import HTTPStatus

from neardup_client import Client
import datetime

from neardup_client.api.analysis import analysis_accuracy, analysis_histogram
from neardup_client.api.collections import (
    delete_collection,
    get_collection,
    list_collections,
    patch_collection,
    put_collection,
)
from neardup_client.api.deduplication import duplicate_groups, duplicate_pairs
from neardup_client.api.documents import (
    batch_documents,
    create_document,
    create_document_in_collection,
    delete_document,
    get_document,
    put_document,
)
from neardup_client.api.operations import (
    export_documents,
    get_metrics,
    get_openapi,
    get_stats,
    import_documents,
)
from neardup_client.types import File
from neardup_client.api.similarity import (
    compare_documents,
    similar_to_document,
    similar_to_document_in_collection,
    similar_to_text,
)
from neardup_client.models import (
    ImportResult,
    AccuracyIn,
    AccuracyOut,
    HistogramIn,
    HistogramOut,
    BatchIn,
    Collection,
    CollectionDetail,
    CollectionList,
    CollectionSettingsIn,
    CollectionSettingsInIndex,
    CollectionSettingsInRetention,
    CollectionSettingsInShingle,
    CollectionSettingsInShingleKind,
    RetentionPatch,
    RetentionPatchRetention,
    CompareOut,
    DocumentIn,
    DocumentPut,
    GroupsPage,
    Pairs,
    Problem,
    SimilarTextIn,
    SimilarToDocument,
    SimilarToText,
    Written,
)

# 24 words: 22 word 3-shingles. B adds one word, so one shingle: the exact
# Jaccard of A and B is 22/23 ≈ 0.9565, above the server's 0.9.
A = (
    "the quick brown fox jumps over the lazy dog while the cat sleeps "
    "on the warm mat near the door of the old house"
)
B = A + " today"
OTHER = "an unrelated question about gardening in spring and the best tomatoes to plant"


def expect(response, status, kind):
    assert response.status_code == status, (response.status_code, response.content)
    assert isinstance(response.parsed, kind), (type(response.parsed), response.content)
    return response.parsed


def main(base_url: str) -> None:
    client = Client(base_url=base_url, raise_on_unexpected_status=True)

    # Create, without a threshold, on a server tuned for 0.9.
    w = expect(create_document.sync_detailed(client=client, body=DocumentIn(text=A, id="a")), 201, Written)
    assert (w.id, w.shingles) == ("a", 22), w
    # Create and ask for the near-duplicates stored before it.
    w = expect(
        create_document.sync_detailed(client=client, body=DocumentIn(text=B, id="b"), similar=True),
        201,
        Written,
    )
    assert [m.id for m in w.similar] == ["a"], w
    assert w.similar[0].jaccard == 22 / 23, w.similar[0]
    # An id that exists: a documented 409, parsed as a problem.
    p = expect(create_document.sync_detailed(client=client, body=DocumentIn(text=A, id="a")), 409, Problem)
    assert p.type_.value == "urn:neardup:problem:already-exists" and p.request_id, p

    # Replace: 201 when new, 200 when it existed.
    expect(put_document.sync_detailed("c", client=client, body=DocumentPut(text=OTHER)), 201, Written)
    w = expect(put_document.sync_detailed("c", client=client, body=DocumentPut(text=OTHER + " now")), 200, Written)
    assert w.id == "c", w
    out = batch_documents.sync_detailed(
        client=client, body=BatchIn(documents=[DocumentIn(text="one more text for the batch route", id="d")])
    )
    assert out.status_code == HTTPStatus.OK and out.parsed.created == 1, out.content

    # Query by id, at the server's own threshold (none sent).
    s = expect(similar_to_document.sync_detailed(client=client, id="a"), 200, SimilarToDocument)
    assert s.threshold == 0.9 and [(m.id, m.jaccard) for m in s.results] == [("b", 22 / 23)], s
    # Query by text.
    s = expect(similar_to_text.sync_detailed(client=client, body=SimilarTextIn(text=A.upper())), 200, SimilarToText)
    assert [(m.id, m.jaccard) for m in s.results] == [("a", 1.0), ("b", 22 / 23)], s
    # A threshold below this deployment's tuning: a documented 400.
    p = expect(similar_to_document.sync_detailed(client=client, id="a", threshold=0.5), 400, Problem)
    assert p.type_.value == "urn:neardup:problem:threshold-below-tuning", p
    # Compare.
    c = expect(compare_documents.sync_detailed(client=client, a="a", b="b"), 200, CompareOut)
    assert (c.intersection, c.union, c.jaccard) == (22, 23, 22 / 23), c

    # The advisor on texts sent with the request: one near-duplicate pair
    # (22/23, in the last of 10 bins) among three pairs.
    h = expect(
        analysis_histogram.sync_detailed(client=client, body=HistogramIn(texts=[A, B, OTHER], k=[3], bins=10)),
        200,
        HistogramOut,
    )
    assert (h.texts, h.histograms[0].pairs) == (3, 3), h
    assert [b.count for b in h.histograms[0].bins] == [2, 0, 0, 0, 0, 0, 0, 0, 0, 1], h
    assert h.histograms[0].suggested_threshold is None, h
    acc = expect(
        analysis_accuracy.sync_detailed(client=client, body=AccuracyIn(texts=[A, B, OTHER], k=[3], num_perm=[64])),
        200,
        AccuracyOut,
    )
    assert acc.threshold == 0.9 and acc.accuracy[0].pairs_at_threshold == 1, acc
    # A sample needs stored texts (this server keeps none): a documented 409.
    p = expect(analysis_histogram.sync_detailed(client=client, body=HistogramIn(sample=10)), 409, Problem)
    assert p.type_.value == "urn:neardup:problem:text-not-stored", p

    # Whole-index answers: groups (JSON page) and pairs (JSON object).
    g = expect(duplicate_groups.sync_detailed(client=client), 200, GroupsPage)
    assert [grp.ids for grp in g.groups] == [["a", "b"]], g
    pairs = expect(duplicate_pairs.sync_detailed(client=client), 200, Pairs)
    assert [(x.a, x.b) for x in pairs.pairs] == [("a", "b")] and pairs.documents == 4, pairs

    # An export (NDJSON, taken as bytes), imported back: every document
    # replaced by itself.
    ex = export_documents.sync_detailed(client=client)
    assert ex.status_code == 200, ex.content[:200]
    lines = ex.content.decode("utf-8").splitlines()
    assert len(lines) == 5 and json.loads(lines[0])["documents"] == 4, lines[:2]
    im = expect(
        import_documents.sync_detailed(client=client, body=File(payload=io.BytesIO(ex.content))),
        200,
        ImportResult,
    )
    assert (im.imported, im.created, im.replaced) == (4, 0, 4), im

    # Text answers.
    metrics = get_metrics.sync_detailed(client=client)
    assert metrics.status_code == 200 and "neardup_documents{collection=\"default\"} 4" in metrics.parsed, metrics.parsed[:200]
    stats = get_stats.sync_detailed(client=client)
    assert stats.status_code == 200 and stats.parsed.documents == 4, stats.content[:200]
    doc = get_openapi.sync_detailed(client=client)
    assert doc.status_code == 200, doc.content[:200]

    # Delete, then the document is a documented 404.
    r = delete_document.sync_detailed("c", client=client)
    assert r.status_code == 204, r.content
    p = expect(get_document.sync_detailed("c", client=client), 404, Problem)
    assert p.type_.value == "urn:neardup:problem:document-not-found", p
    collections(client)
    print("client check: every call answered as documented")


def collections(client) -> None:
    """A collection with its own recipe (character 5-shingles at 0.7) and
    retention, driven through the generated client."""
    settings = CollectionSettingsIn(
        shingle=CollectionSettingsInShingle(kind=CollectionSettingsInShingleKind.CHAR, k=5),
        index=CollectionSettingsInIndex(threshold=0.7),
        retention=CollectionSettingsInRetention(ttl_secs=86400),
    )
    c = expect(put_collection.sync_detailed("titles", client=client, body=settings), 201, Collection)
    assert c.settings.shingle.k == 5 and c.settings.retention.ttl_secs == 86400, c
    expect(put_collection.sync_detailed("titles", client=client, body=settings), 200, Collection)
    other = CollectionSettingsIn(shingle=CollectionSettingsInShingle(k=4))
    p = expect(put_collection.sync_detailed("titles", client=client, body=other), 409, Problem)
    assert p.type_.value == "urn:neardup:problem:collection-conflict", p
    p = expect(put_collection.sync_detailed("Bad.Name", client=client, body=settings), 400, Problem)
    assert p.type_.value == "urn:neardup:problem:invalid-collection-name", p

    # EXAMPLES.md: character 5-shingles, Jaccard 0.75 (above this collection's 0.7;
    # the default collection, word 3-shingles at 0.9, would not match them).
    for i, text in (("t1", "Can I make 50,000 a month by day trading?"),
                    ("t2", "Can I make 30,000 a month by day trading?")):
        expect(create_document_in_collection.sync_detailed(
            "titles", client=client, body=DocumentIn(text=text, id=i)), 201, Written)
    r = expect(similar_to_document_in_collection.sync_detailed("titles", client=client, id="t1"),
               200, SimilarToDocument)
    assert [(m.id, m.jaccard) for m in r.results] == [("t2", 0.75)], r
    future = datetime.datetime(2030, 1, 1, tzinfo=datetime.timezone.utc)
    r = expect(similar_to_document_in_collection.sync_detailed(
        "titles", client=client, id="t1", since=future), 200, SimilarToDocument)
    assert r.results == [], r

    patch = RetentionPatch(retention=RetentionPatchRetention(ttl_secs=None))
    c = expect(patch_collection.sync_detailed("titles", client=client, body=patch), 200, Collection)
    assert c.settings.retention.ttl_secs is None, c
    d = expect(get_collection.sync_detailed("titles", client=client), 200, CollectionDetail)
    assert d.documents == 2, d
    names = [x.name for x in expect(list_collections.sync_detailed(client=client), 200, CollectionList).collections]
    assert names == ["default", "titles"], names
    r = delete_collection.sync_detailed("titles", client=client)
    assert r.status_code == 204, r.content
    p = expect(get_collection.sync_detailed("titles", client=client), 404, Problem)
    assert p.type_.value == "urn:neardup:problem:collection-not-found", p


if __name__ == "__main__":
    main(sys.argv[1])
