"""Namespaces: an account of the emulator's fixture per test, so that parallel workers share one
emulator (``audience_namespace``, ``audience_namespace_client``), against the real emulator."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from audience_client import AudienceClient, AudienceProblem, Emulator, Namespace, Retry

V = "com.acme1"
SHOP = f"{V}.sections.user-created.shop"


def tag_names(client: AudienceClient) -> list[str]:
    return [t["name"] for t in client.get_audience_sections_tags(SHOP)["items"]]


@pytest.fixture
def other(audience_emulator: Emulator) -> Iterator[Namespace]:
    """A second namespace: another worker's test, on the same emulator."""
    with audience_emulator.namespace() as namespace:
        yield namespace


def test_namespaces_keep_data_request_logs_and_faults_apart(
    audience_namespace: Namespace, audience_namespace_client: AudienceClient, other: Namespace
):
    mine, theirs = audience_namespace, other
    assert mine.id != theirs.id and mine.account.client_id != theirs.account.client_id
    assert mine.account.account_id == mine.id
    with theirs.client() as their_client:
        audience_namespace_client.post_audience_sections_tags(SHOP, {"name": "Only mine"})
        assert "Only mine" in tag_names(audience_namespace_client)
        assert "Only mine" not in tag_names(their_client)

        # Each namespace's log holds its own requests (its token request included) only.
        log = mine.control.requests.list()
        assert log and all(r["namespace"] == mine.id for r in log)
        assert "POST /oauth/token" in [f"{r['method']} {r['path']}" for r in log]
        assert f"/audience/sections/{SHOP}/tags" not in [
            r["path"] for r in theirs.control.requests.list(method="POST")
        ]

        # A namespace's fault applies to its own requests only, whoever asks first.
        fault = mine.control.faults.add(path=f"/audience/sections/{SHOP}/tags", status=500)
        assert fault["namespace"] == mine.id
        assert theirs.control.faults.list() == []
        assert mine.control.faults.list() == [fault]
        tag_names(their_client)
        with pytest.raises(AudienceProblem) as refused:
            with mine.client(retry=Retry(attempts=0)) as once:
                tag_names(once)
        assert refused.value.status == 500
        assert mine.control.faults.list() == []
        assert mine.control.requests.list(limit=1)[0]["fault"] == fault["id"]

        # Forgetting a namespace's log leaves the other's.
        theirs_before = len(theirs.control.requests.list())
        mine.control.requests.clear()
        assert mine.control.requests.list() == []
        assert len(theirs.control.requests.list()) == theirs_before


def test_a_namespace_runs_its_own_jobs(
    audience_emulator: Emulator, audience_namespace: Namespace, other: Namespace, import_points
):
    # Manual jobs: the namespace's client runs its due jobs instead of waiting between polls.
    audience_emulator.control.jobs.set_mode("manual")
    try:
        client = audience_namespace.client(sleep=lambda seconds: audience_namespace.control.jobs.run())
        with client:
            status = import_points(client, "email;points\r\nns@shop.test;7\r\n")
        assert status["result"]["status"] == "completed"
        assert other.control.jobs.list()["items"] == []
    finally:
        audience_emulator.control.jobs.set_mode("automatic")


def test_a_reset_removes_the_namespaces(audience_emulator: Emulator):
    with audience_emulator.namespace() as namespace:
        audience_emulator.control.reset()
        with pytest.raises(AudienceProblem) as refused:
            namespace.control.requests.list()
    assert (refused.value.status, refused.value.code) == (404, "AUD-2208")
