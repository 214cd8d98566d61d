"""Verifying the service's webhook deliveries as Standard Webhooks specifies.

A delivery is signed with HMAC-SHA256, keyed by the endpoint's secret (``whsec_`` and base64), over
``<webhook-id>.<webhook-timestamp>.<body>``; ``webhook-signature`` holds ``v1,<base64>`` values,
space-separated, one per secret the endpoint signs with (two while a rotation overlaps).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any


class WebhookVerificationError(ValueError):
    """A delivery that does not verify: why, without the secret or the body."""


def verify_webhook(
    secrets: str | Iterable[str],
    headers: Mapping[str, str],
    body: bytes | str,
    *,
    tolerance_seconds: float = 300,
    now: Callable[[], float] = time.time,
) -> dict[str, Any]:
    """Checks a delivery's signature against ``secrets`` (one, or the old and the new one while you
    rotate) and its timestamp (within ``tolerance_seconds`` of ``now()``, seconds since the epoch),
    and returns its body parsed with its ``id`` (the ``webhook-id``: deduplicate on it); raises
    ``WebhookVerificationError`` otherwise. ``body`` must be the request's body as it arrived.
    """
    lower = {k.lower(): v for k, v in headers.items()}

    def header(name: str) -> str:
        value = lower.get(name)
        if not value:
            raise WebhookVerificationError(f"the {name} header is missing")
        return value

    msg_id, timestamp, signatures = header("webhook-id"), header("webhook-timestamp"), header("webhook-signature")
    if not timestamp.isdigit():
        raise WebhookVerificationError("webhook-timestamp is not a number of seconds")
    skew = now() - int(timestamp)
    if abs(skew) > tolerance_seconds:
        direction = "old" if skew > 0 else "ahead"
        raise WebhookVerificationError(f"webhook-timestamp is {round(abs(skew))} s {direction}, beyond {tolerance_seconds} s")
    raw = body.encode() if isinstance(body, str) else body
    signed = f"{msg_id}.{timestamp}.".encode() + raw
    given = [s[3:].encode() for s in signatures.split(" ") if s.startswith("v1,")]
    for secret in [secrets] if isinstance(secrets, str) else secrets:
        try:
            key = base64.b64decode(secret.removeprefix("whsec_"), validate=True)
        except binascii.Error:
            key = b""
        if not key:
            raise WebhookVerificationError("the secret is empty or not base64")
        expected = base64.b64encode(hmac.new(key, signed, hashlib.sha256).digest())
        if any(hmac.compare_digest(expected, g) for g in given):
            break
    else:
        raise WebhookVerificationError("no signature of webhook-signature matches the secret")
    try:
        event = json.loads(raw)
    except ValueError:
        raise WebhookVerificationError("the body is not JSON") from None
    return {"id": msg_id, "type": event.get("type"), "timestamp": event.get("timestamp"), "data": event.get("data")}
