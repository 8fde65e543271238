// Snippets: what each listed document is, under its id (POST /snippets:
// the first words of its stored text as posted, and a title from a
// metadata field). One request per page of a list (at most 200 ids a
// request: a longer page is asked in as many requests). The text is
// untrusted: it goes into the page as Text nodes only (dom.js `h`), never
// as markup, so a stored <script> or bidi override shows as characters.

import { api, collectionBase } from './api.js';
import { h } from './dom.js';

/** Most ids one POST /snippets takes. */
const PER_REQUEST = 200;
/** Words of a listed document's snippet. */
const WORDS = 24;

/** The snippets of `ids` in `collection` (a Map id → snippet; ids the
 * server does not answer are absent). A failed request leaves its ids
 * without snippets: a list still shows its ids. */
export async function loadSnippets(collection, ids) {
  const unique = [...new Set(ids.filter((id) => typeof id === 'string' && id !== ''))];
  const out = new Map();
  const chunks = [];
  for (let i = 0; i < unique.length; i += PER_REQUEST) chunks.push(unique.slice(i, i + PER_REQUEST));
  await Promise.all(chunks.map(async (chunk) => {
    try {
      const answer = await api(`${collectionBase(collection)}/snippets`, {
        method: 'POST', body: { ids: chunk, words: WORDS },
      });
      for (const [id, s] of Object.entries(answer.snippets || {})) out.set(id, s);
    } catch {
      // The list shows its ids alone.
    }
  }));
  return out;
}

/** A document's snippet as a block under its id: the title bold, the text
 * muted, "…" when the stored text goes on; null when there is nothing to
 * show. Text nodes only. */
export function snippetNode(id, snippet) {
  if (!snippet || (snippet.title == null && snippet.text == null)) return null;
  const text = snippet.text == null ? null : `${snippet.text}${snippet.truncated ? '…' : ''}`;
  return h('div', { class: 'snip', testid: 'snippet', dataset: { id } },
    snippet.title == null ? null : h('strong', { class: 'snip-title', testid: 'snippet-title' }, snippet.title),
    snippet.title != null && text ? ' ' : null,
    text ? h('span', { class: 'snip-text', testid: 'snippet-text' }, text) : null);
}
