// The API client: the key lives in this module's memory only (never in
// browser storage, never in a URL) and goes out as a Bearer token.

const session = {
  key: null,
  /** The served OpenAPI document says whether keys are configured. */
  keysConfigured: false,
  /** Whether the key may call anything but GET and HEAD. */
  readOnly: false,
  /** The path templates of the served OpenAPI document (what this server routes). */
  paths: null,
};

export class ApiError extends Error {
  constructor(status, problem) {
    const detail = problem && (problem.detail || problem.title);
    super(detail ? `${status}: ${detail}` : `HTTP ${status}`);
    this.status = status;
    this.problem = problem || null;
    this.type = problem && problem.type ? problem.type.replace('urn:neardup:problem:', '') : null;
  }
}

let onUnauthorized = () => {};

/** Called with the error when a request is refused for its key (401). */
export function whenUnauthorized(fn) {
  onUnauthorized = fn;
}

export function keyState() {
  return { ...session, key: session.key ? '(set)' : null };
}

export function canWrite() {
  return !session.readOnly;
}

/** Send a request; the parsed JSON body (null for 204), or an ApiError. */
export async function api(path, options = {}) {
  return (await request(path, options)).data;
}

/** GET an NDJSON answer: its lines parsed (blank lines skipped) and the
 * response headers (for cursors), or an ApiError. */
export async function apiLines(path) {
  const { data, headers } = await request(path, { accept: 'application/x-ndjson', raw: true });
  const lines = String(data || '').split('\n').filter((l) => l.trim() !== '');
  return { items: lines.map((l) => JSON.parse(l)), headers };
}

/** GET an answer as text, asking for the media type `accept` (an export
 * to save as a file), or an ApiError. */
export async function apiText(path, accept) {
  const { data } = await request(path, { accept, raw: true });
  return typeof data === 'string' ? data : JSON.stringify(data);
}

async function request(path, { method = 'GET', body, accept, raw = false } = {}) {
  const headers = { Accept: accept || 'application/json' };
  if (session.key) headers.Authorization = `Bearer ${session.key}`;
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  const resp = await fetch(path, {
    method,
    headers,
    body: body === undefined ? undefined : JSON.stringify(body),
    credentials: 'omit',
    cache: 'no-store',
  });
  const type = resp.headers.get('content-type') || '';
  const data = resp.status === 204 ? null
    : type.includes('json') && !(raw && resp.ok) ? await resp.json().catch(() => null)
    : await resp.text();
  if (!resp.ok) {
    const err = new ApiError(resp.status, data && typeof data === 'object' ? data : null);
    err.retryAfter = Number(resp.headers.get('retry-after')) || null;
    if (resp.status === 401) onUnauthorized(err);
    throw err;
  }
  return { data, headers: resp.headers };
}

/** Learn from the served OpenAPI document whether keys are configured. */
export async function discover() {
  const doc = await api('/openapi.json');
  session.keysConfigured = Array.isArray(doc.security) && doc.security.length > 0;
  session.paths = new Set(Object.keys(doc.paths || {}));
  return session.keysConfigured;
}

/** Whether this server routes `path` (a template of its OpenAPI document,
 * e.g. /review/precision): a view asks before calling a route that a
 * server of another version may not have. Unknown (true) before discover(). */
export function serves(path) {
  return session.paths === null || session.paths.has(path);
}

/** Try `key`: it must open GET /collections. Then learn whether it may
 * write: an empty batch (which stores nothing) is refused 403 for a
 * read-only key before its body is read, and answered 200 for any other. */
export async function useKey(key, collection) {
  const previous = session.key;
  session.key = key;
  try {
    await api('/collections');
  } catch (e) {
    session.key = previous;
    throw e;
  }
  session.readOnly = await probeReadOnly(collection);
  return { readOnly: session.readOnly };
}

async function probeReadOnly(collection) {
  try {
    await api(`${collectionBase(collection)}/documents/batch`, { method: 'POST', body: { documents: [] } });
    return false;
  } catch (e) {
    return e.status === 403;
  }
}

export function needsKey() {
  return session.keysConfigured && !session.key;
}

/** The route prefix of a collection: /collections/{name}. */
export function collectionBase(name) {
  return `/collections/${encodeURIComponent(name)}`;
}
