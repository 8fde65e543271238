"""schemathesis hooks for scripts/schemathesis.sh: how to send an
`application/x-ndjson` body (a string in a document), as its UTF-8 bytes,
exactly as generated. POST /import is documented as
`application/octet-stream` (the server takes both), which schemathesis
sends itself. No generated data is rewritten."""

import schemathesis


@schemathesis.serializer("application/x-ndjson")
def ndjson(ctx, value):
    if isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode("utf-8")
    # Not a string (negative data): as JSON text, still one line.
    import json

    return json.dumps(value).encode("utf-8")
