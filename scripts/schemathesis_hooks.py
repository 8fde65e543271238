"""schemathesis hooks for scripts/schemathesis.sh: how to send the one
request body that is not JSON. POST /import takes an export's NDJSON
(`application/x-ndjson`, a string in the document): sent as its UTF-8
bytes, exactly as generated. No generated data is rewritten."""

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
