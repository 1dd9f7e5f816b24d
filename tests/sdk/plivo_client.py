#!/usr/bin/env python3
"""Plivo's Python SDK, unpatched, as a client of `telemeter serve`.

Usage: plivo_client.py BASE_URL AUTH_ID AUTH_TOKEN ENDPOINT_ID

The SDK has no base-URL option: its module constants name the API host,
so pointing it at telemeter is setting them before the client is made
(docs/server.md, "Using Plivo's SDKs"). Prints one JSON object of what
the SDK returned, for tests/it/sdk.rs to hold against the server's own
answers.
"""
import json
import sys

import plivo
from plivo.rest import client as rest

base_url, auth_id, auth_token, endpoint_id = sys.argv[1:5]
for name in ("PLIVO_API_BASE_URI", "API_VOICE_BASE_URI",
             "API_VOICE_BASE_URI_FALLBACK_1", "API_VOICE_BASE_URI_FALLBACK_2"):
    setattr(rest, name, base_url + "/v1/Account")

client = plivo.RestClient(auth_id, auth_token)
listed = client.recordings.list(limit=20, offset=0)
first = listed[0].recording_id
one = client.recordings.get(first)
endpoint = client.endpoints.get(endpoint_id)
client.recordings.delete(first)
try:
    client.recordings.get(first)
    deleted = "still there"
except plivo.exceptions.ResourceNotFoundError:
    deleted = "not found"
try:
    plivo.RestClient(auth_id, "wrong-token").endpoints.get(endpoint_id)
    refused = "accepted"
except plivo.exceptions.AuthenticationError:
    refused = "authentication error"

print(json.dumps({
    "listed": [r.recording_id for r in listed],
    "total_count": listed.meta["total_count"] if hasattr(listed, "meta") else None,
    "recording": {k: str(getattr(one, k)) for k in (
        "recording_id", "recording_duration_ms", "recording_format", "recording_type", "call_uuid")},
    "endpoint": {k: str(getattr(endpoint, k)) for k in ("endpoint_id", "username", "sip_uri", "sip_registered")},
    "deleted": deleted,
    "wrong_token": refused,
}))
