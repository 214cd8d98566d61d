"""verify_webhook against the test vector of the Standard Webhooks specification, which its
reference library (standardwebhooks) signs the same: no emulator needed."""

from __future__ import annotations

import pytest

from audience_client import WebhookVerificationError, verify_webhook

SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
OTHER = "whsec_" + "A" * 43 + "="
BODY = b'{"test": 2432232314}'
HEADERS = {
    "webhook-id": "msg_p5jXN8AQM9LWM0D4loKWxJek",
    "webhook-timestamp": "1614265330",
    "webhook-signature": "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=",
}
AT = 1614265330


def test_verifies_the_reference_vector_with_either_secret_of_a_rotation() -> None:
    event = verify_webhook(SECRET, HEADERS, BODY, now=lambda: AT + 10)
    assert event["id"] == "msg_p5jXN8AQM9LWM0D4loKWxJek"
    assert verify_webhook([OTHER, SECRET], {k.title(): v for k, v in HEADERS.items()}, BODY.decode(), now=lambda: AT)
    rotated = {**HEADERS, "webhook-signature": "v1,bm90IHRoaXMgb25l " + HEADERS["webhook-signature"]}
    assert verify_webhook(SECRET, rotated, BODY, now=lambda: AT)["id"] == HEADERS["webhook-id"]


@pytest.mark.parametrize(
    "secret, headers, body, message",
    [
        (SECRET, HEADERS, b'{"test": 2432232315}', "no signature"),
        (OTHER, HEADERS, BODY, "no signature"),
        (SECRET, {**HEADERS, "webhook-id": "msg_other"}, BODY, "no signature"),
        (SECRET, {k: v for k, v in HEADERS.items() if k != "webhook-signature"}, BODY, "header is missing"),
        (SECRET, {**HEADERS, "webhook-timestamp": "soon"}, BODY, "not a number"),
        ("whsec_", HEADERS, BODY, "secret is empty"),
    ],
)
def test_refuses_what_was_tampered_with(secret, headers, body, message) -> None:
    with pytest.raises(WebhookVerificationError, match=message):
        verify_webhook(secret, headers, body, now=lambda: AT)


def test_refuses_a_timestamp_beyond_the_tolerance() -> None:
    with pytest.raises(WebhookVerificationError, match="600 s old, beyond 300 s"):
        verify_webhook(SECRET, HEADERS, BODY, now=lambda: AT + 600)
    assert verify_webhook(SECRET, HEADERS, BODY, now=lambda: AT + 600, tolerance_seconds=900)
