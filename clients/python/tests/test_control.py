"""The control client's listings (outbound calls, webhook deliveries, snapshots, faults) and a held job,
against the real emulator: the same calls as the TypeScript control client, in Python's spelling."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from audience_client import AudienceClient, Emulator, EmulatorControl

V = "com.acme1"
SHOP = f"{V}.sections.user-created.shop"
EMAIL = f"{V}.keyspaces.email"
POINTS = f"{V}.attributes.user-created.loyalty-points"


class _Receiver(BaseHTTPRequestHandler):
    received: list[bytes] = []

    def do_POST(self) -> None:  # noqa: N802 (http.server's name)
        self.received.append(self.rfile.read(int(self.headers.get("content-length", 0))))
        self.send_response(200)
        self.send_header("content-length", "8")
        self.end_headers()
        self.wfile.write(b"received")

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def receiver() -> Iterator[str]:
    """A webhook receiver on loopback, answering 200; stopped after the test."""
    _Receiver.received = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Receiver)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/hooks"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


def test_webhook_deliveries_and_outbound_calls_are_listed_and_faulted(
    audience_client: AudienceClient, audience_control: EmulatorControl, receiver: str
):
    # Manual jobs: each delivery attempt is made when the test runs the jobs, not by the worker meanwhile.
    audience_control.jobs.set_mode("manual")
    audience_client.post_webhooks({"url": receiver, "event_types": ["profile.deleted"]})
    audience_client.post_audience_keyspaces_sections_profiles(EMAIL, SHOP, {"profile_key": "gone@shop.test"})
    fault = audience_control.outbound.faults.add(kind="webhook", status=503)
    assert audience_control.outbound.faults.list() == [fault]
    audience_client.delete_audience_keyspaces_profiles_by_profile_key(EMAIL, "gone@shop.test")
    assert audience_control.jobs.run() >= 1
    assert audience_control.outbound.faults.list() == []  # spent
    # The refused attempt is tried again after its back-off: the clock brings it forward.
    audience_control.clock.advance(3600)
    assert audience_control.jobs.run() >= 1
    faulted, delivered = audience_control.webhooks.list(type="profile.deleted")
    assert (faulted["answer"]["status"], faulted["fault"]) == (503, fault["id"])
    assert delivered["answer"] == {"status": 200, "body": "received"}
    assert delivered["url"] == receiver and delivered["event_id"] == faulted["event_id"]
    assert delivered["body"]["type"] == "profile.deleted"
    assert len(_Receiver.received) == 1
    assert audience_control.webhooks.list(limit=1) == [delivered]
    assert audience_control.webhooks.list(url="http://elsewhere/*") == []
    calls = audience_control.outbound.list(kind="webhook")
    assert [c["id"] for c in calls] == [faulted["id"], delivered["id"]]
    assert audience_control.outbound.list(after=delivered["id"]) == []
    audience_control.outbound.clear()
    assert audience_control.outbound.list() == []


def test_snapshots_are_listed(audience_control: EmulatorControl):
    audience_control.snapshot("listed")
    assert "listed" in audience_control.snapshots.list()


def test_a_held_import_is_seen_queued_then_in_progress_then_completed(
    audience_emulator: Emulator, audience_control: EmulatorControl
):
    audience_control.jobs.set_mode("manual")
    seen: list[str] = []

    def step(seconds: float) -> None:
        # Between the import's polls: hold its job, then let it go.
        job = next(j for j in audience_control.jobs.list()["items"] if j["kind"] == "import")
        import_id = job["payload"]["import_id"]
        seen.append(client.get_audience_sections_imports_by_import_id(SHOP, import_id)["result"]["status"])
        if job["state"] == "waiting":
            audience_control.jobs.hold(job["job_id"])
            seen.append(client.get_audience_sections_imports_by_import_id(SHOP, import_id)["result"]["status"])
            held = next(j for j in audience_control.jobs.list()["items"] if j["job_id"] == job["job_id"])
            assert held["state"] == "running"
        else:
            audience_control.jobs.release(job["job_id"])

    with audience_emulator.client(sleep=step) as client:
        attributes = client.get_audience_sections_attributes(SHOP)["items"]
        points = next(a for a in attributes if a["discriminator"] == POINTS)["versions"][-1]["id"]
        status = client.import_profiles(
            SHOP,
            {
                "keyspace_mapping": {"keyspace_discriminator": EMAIL, "field_selector": "email"},
                "attribute_mappings": [{"field_selector": "points", "attribute_version_id": points}],
            },
            "email;points\r\nheld@shop.test;7\r\n",
            poll_interval=1,
        )
    assert status["result"]["status"] == "completed"
    assert seen == ["queued", "in_progress", "in_progress"]
