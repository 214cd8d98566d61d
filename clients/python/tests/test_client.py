"""The Python client against the real emulator, as an integrator's suite uses both.

The emulator is started once for the run (``audience_emulator``) and reset before each test
(``audience_control``, ``audience_client``); its vendor word is ``acme`` (pyproject.toml). Time
moves through the emulator's clock, and jobs run through its control API: no test sleeps.
"""

from __future__ import annotations

import threading

import httpx
import pytest

from audience_client import PROBLEMS, AudienceClient, AudienceError, AudienceProblem, Emulator, EmulatorControl, Retry

V = "com.acme1"
SHOP = f"{V}.sections.user-created.shop"
EMAIL = f"{V}.keyspaces.email"
LOYAL = f"{V}.segments.user-created.loyal-customers"
CITY = f"{V}.attributes.user-created.city"
POINTS = f"{V}.attributes.user-created.loyalty-points"


def recording_client(emulator: Emulator, control: EmulatorControl, **options) -> tuple[AudienceClient, list[float]]:
    """A client of the ready account whose waits are recorded, then spent on the emulator's clock."""
    waits: list[float] = []

    def sleep(seconds: float) -> None:
        waits.append(seconds)
        control.sleep(seconds)

    return emulator.client(sleep=sleep, **options), waits


def latest_version(client: AudienceClient, attribute: str) -> str:
    attributes = client.get_audience_sections_attributes(SHOP)["items"]
    return next(a for a in attributes if a["discriminator"] == attribute)["versions"][-1]["id"]


def statuses(control: EmulatorControl, path: str) -> list[int]:
    return [r["status"] for r in control.requests.list(path=path)]


def test_profiles_are_created_and_their_attributes_written_and_read(audience_client: AudienceClient):
    audience_client.post_audience_keyspaces_sections_profiles(EMAIL, SHOP, {"profile_key": "ann@shop.test"})
    audience_client.patch_v2_audience_keyspaces_profiles_sections_attributes(
        EMAIL, "ann@shop.test", SHOP, {CITY: "Hamburg", POINTS: 150}
    )
    values = audience_client.get_audience_keyspaces_profiles_sections_attributes(EMAIL, "ann@shop.test", SHOP)
    assert values[latest_version(audience_client, CITY)] == "Hamburg"
    assert values[latest_version(audience_client, POINTS)] == 150
    with pytest.raises(AudienceProblem) as refused:
        audience_client.post_audience_keyspaces_sections_profiles(EMAIL, SHOP, {"profile_key": "ann@shop.test"})
    assert refused.value.code == "AUD-1204"


def test_consents_are_given_and_read_back(audience_client: AudienceClient):
    audience_client.post_audience_keyspaces_sections_profiles(EMAIL, SHOP, {"profile_key": "bo@shop.test"})
    topics = audience_client.get_v2_audience_sections_topics(SHOP)["items"]
    topic = next(t for t in topics if t["name"] == "Email offers")["discriminator"]
    audience_client.post_v2_audience_keyspaces_profiles_sections_consents(
        EMAIL,
        "bo@shop.test",
        SHOP,
        {
            "topic_discriminator": topic,
            "channel_discriminator": f"{V}.channels.email",
            "type": "opt-in",
            "reason": "Ticked the box at checkout",
        },
    )
    consents = audience_client.get_v2_audience_keyspaces_profiles_sections_consents(EMAIL, "bo@shop.test", SHOP)
    given = [c for c in consents["items"] if c["topic_discriminator"] == topic]
    assert [(c["channel_discriminator"], c["type"]) for c in given] == [(f"{V}.channels.email", "opt-in")]


def test_a_segment_counts_the_profiles_it_holds(audience_client: AudienceClient):
    for key, points in (("ann@shop.test", 150), ("bo@shop.test", 20), ("cleo@shop.test", 310)):
        audience_client.post_audience_keyspaces_sections_profiles(EMAIL, SHOP, {"profile_key": key})
        audience_client.patch_v2_audience_keyspaces_profiles_sections_attributes(EMAIL, key, SHOP, {POINTS: points})
    count = audience_client.post_audience_profiles_reports_segments_count(
        {"section_discriminator": SHOP, "segment": {"timezone": "UTC", "segment_discriminator": LOYAL}}
    )
    assert count == {"profile_count": 2}


def test_an_import_is_uploaded_and_completed_by_the_emulators_jobs(
    audience_emulator: Emulator, audience_control: EmulatorControl
):
    # Each wait between polls runs the emulator's due jobs instead of passing.
    polls: list[float] = []

    def run_jobs(seconds: float) -> None:
        polls.append(seconds)
        audience_control.jobs.run()

    with audience_emulator.client(sleep=run_jobs) as client:
        status = client.import_profiles(
            SHOP,
            {
                "keyspace_mapping": {"keyspace_discriminator": EMAIL, "field_selector": "email"},
                "attribute_mappings": [
                    {"field_selector": "points", "attribute_version_id": latest_version(client, POINTS)}
                ],
            },
            "email;points\r\nann@shop.test;150\r\nbo@shop.test;20\r\n",
            poll_interval=1,
        )
        assert status["result"]["status"] == "completed"
        assert (status["result"]["profiles_found"], status["result"]["profiles_processed"]) == (2, 2)
        assert len(polls) <= 2  # the first jobs run finished it, whether the worker had begun it or not
        # The upload carried the form's signature, not the bearer token.
        upload = audience_control.requests.list(path="/files/uploads")
        assert [(r["status"], r["headers"].get("authorization")) for r in upload] == [(204, None)]
        count = client.post_audience_profiles_reports_segments_count(
            {"section_discriminator": SHOP, "segment": {"timezone": "UTC", "segment_discriminator": LOYAL}}
        )
        assert count["profile_count"] == 1


def test_an_import_whose_upload_window_the_clock_closed_is_refused(audience_client: AudienceClient, audience_control):
    created = audience_client.post_v2_audience_sections_imports(
        SHOP,
        {
            "keyspace_mapping": {"keyspace_discriminator": EMAIL, "field_selector": "email"},
            "attribute_mappings": [
                {"field_selector": "points", "attribute_version_id": latest_version(audience_client, POINTS)}
            ],
        },
    )
    audience_control.clock.advance(6 * 60)  # the upload window is 5 minutes
    upload = httpx.post(
        created["file_upload_url"],
        data=created["file_upload_body"],
        files={"file": ("import.csv", b"email;points\r\nann@shop.test;1\r\n", "text/csv")},
    )
    problem = AudienceProblem(upload.json(), "POST /files/uploads", upload)
    assert (problem.status, problem.code) == (403, "AUD-1807")


def test_a_problem_document_is_raised_with_its_code_title_detail_and_fields(
    audience_emulator: Emulator, audience_client: AudienceClient
):
    with pytest.raises(AudienceProblem) as refused:
        audience_client.get_audience_segments_by_segment_discriminator(f"{V}.segments.user-created.nothing")
    problem = refused.value
    assert (problem.code, problem.status, problem.title) == ("AUD-1104", 404, "Segment not found")
    assert PROBLEMS["AUD-1104"] == (404, "Segment not found")
    assert "nothing" in problem.detail
    assert problem.fields["status_code"] == 404
    assert problem.request == f"GET /audience/segments/{V}.segments.user-created.nothing"
    assert "AUD-1104" in str(problem)
    with AudienceClient(audience_emulator.base_url, "nobody", "nothing") as stranger:
        with pytest.raises(AudienceProblem) as unknown:
            stranger.get_audience_sections()
    assert (unknown.value.code, unknown.value.status) == ("AUD-1009", 401)


def test_a_token_is_fetched_once_kept_and_renewed_before_it_expires(
    audience_emulator: Emulator, audience_control: EmulatorControl
):
    with audience_emulator.client() as client:
        audience_control.requests.clear()
        # Concurrent first calls wait for the same token request.
        results: list[object] = []
        calls = [
            threading.Thread(target=lambda: results.append(client.get_audience_sections())),
            threading.Thread(target=lambda: results.append(client.get_audience_keyspaces())),
        ]
        for call in calls:
            call.start()
        for call in calls:
            call.join()
        assert len(results) == 2
        assert len(audience_control.requests.list(path="/oauth/token")) == 1
        sent = audience_control.requests.list(path="/audience/sections")
        assert sent[0]["headers"]["authorization"].startswith("Bearer ")
        # Tokens live a day: 30 seconds before its end (within renew_before), the next call fetches the next one.
        first = client.token()
        audience_control.clock.advance(24 * 3600 - 30)
        client.get_audience_sections()
        assert len(audience_control.requests.list(path="/oauth/token")) == 2
        assert client.token() != first


def test_a_token_the_service_refuses_before_its_time_is_fetched_again(
    audience_emulator: Emulator, audience_control: EmulatorControl
):
    # A client on the system's clock: the emulator's time moves on without it, and the token it holds expires.
    with audience_emulator.client(on_emulator_clock=False) as client:
        client.get_audience_sections()
        audience_control.requests.clear()
        audience_control.clock.advance(25 * 3600)
        assert client.get_audience_sections()["items"]
        assert statuses(audience_control, "/audience/sections") == [401, 200]
        assert len(audience_control.requests.list(path="/oauth/token")) == 1


def test_a_503_is_sent_again_after_its_retry_after_or_a_backoff(
    audience_emulator: Emulator, audience_control: EmulatorControl
):
    client, waits = recording_client(audience_emulator, audience_control)
    with client:
        client.token()
        audience_control.faults.add("/audience/keyspaces", status=503, retry_after=2)
        audience_control.faults.add("/audience/keyspaces", status=503)
        assert client.get_audience_keyspaces()["items"]
        assert statuses(audience_control, "/audience/keyspaces") == [503, 503, 200]
        assert waits == [2, 1]


def test_a_429_waits_for_its_retry_after_and_a_dropped_connection_is_tried_again(
    audience_emulator: Emulator, audience_control: EmulatorControl
):
    client, waits = recording_client(audience_emulator, audience_control)
    with client:
        client.token()
        audience_control.faults.add("/audience/sections", method="GET", status=429, retry_after=3)
        audience_control.faults.add("/audience/sections", method="GET", drop=True)
        assert client.get_audience_sections()["items"]
        assert statuses(audience_control, "/audience/sections") == [429, 0, 200]
        assert waits == [3, 1]


def test_retries_are_configurable_and_the_last_answer_is_raised(
    audience_emulator: Emulator, audience_control: EmulatorControl
):
    client, waits = recording_client(audience_emulator, audience_control, retry=Retry(attempts=2, max_delay=5))
    with client:
        client.token()
        audience_control.faults.add("/audience/sections", times=3, status=503, retry_after=60)
        with pytest.raises(AudienceProblem) as refused:
            client.get_audience_sections()
        assert refused.value.status == 503
        assert waits == [5, 5]  # Retry-After asked for 60 seconds; max_delay caps it
    quiet, _ = recording_client(audience_emulator, audience_control, retry=Retry(dropped_connections=False))
    with quiet:
        quiet.token()
        audience_control.faults.add("/audience/sections", drop=True)
        with pytest.raises(httpx.TransportError):
            quiet.get_audience_sections()


def test_a_segment_export_is_polled_on_the_emulators_clock_and_its_file_answered(
    audience_client: AudienceClient, audience_control: EmulatorControl
):
    for key, points in (("ann@shop.test", 150), ("bo@shop.test", 20)):
        audience_client.post_audience_keyspaces_sections_profiles(EMAIL, SHOP, {"profile_key": key})
        audience_client.patch_v2_audience_keyspaces_profiles_sections_attributes(EMAIL, key, SHOP, {POINTS: points})
    file = audience_client.export_file(
        "/audience/profiles/reports/segments",
        {
            "section_discriminator": SHOP,
            "segment": {"timezone": "UTC", "segment_discriminator": LOYAL},
            "attributes": [{"field_name": "points", "attribute_version_id": latest_version(audience_client, POINTS)}],
        },
    )
    header, *rows = file.text.strip().splitlines()
    assert "points" in header.split(",")
    assert len(rows) == 1 and "150" in rows[0]


def test_a_snapshot_is_saved_listed_and_reset_to(audience_client: AudienceClient, audience_control: EmulatorControl):
    audience_client.post_audience_keyspaces_sections_profiles(EMAIL, SHOP, {"profile_key": "ann@shop.test"})
    audience_control.snapshot("with_ann")
    assert "with_ann" in audience_control.snapshots()
    audience_client.post_audience_keyspaces_sections_profiles(EMAIL, SHOP, {"profile_key": "bo@shop.test"})
    audience_control.reset("with_ann")
    kept = audience_client.get_audience_keyspaces_profiles_sections_attributes(EMAIL, "ann@shop.test", SHOP)
    assert "ann@shop.test" in kept.values()
    with pytest.raises(AudienceProblem) as gone:
        audience_client.get_audience_keyspaces_profiles_sections_attributes(EMAIL, "bo@shop.test", SHOP)
    assert gone.value.code == "AUD-1201"
    with pytest.raises(AudienceProblem) as refused:
        audience_control.reset("no_such_snapshot")
    assert refused.value.code.startswith("AUD-22")


def test_operator_operations_take_the_operator_token(audience_emulator: Emulator, audience_client: AudienceClient):
    account_id = audience_emulator.account.account_id
    assert audience_client.get_admin_accounts_by_account_id(account_id)["id"] == account_id
    with AudienceClient(audience_emulator.base_url, "id", "secret") as without:
        with pytest.raises(AudienceError, match="admin_token"):
            without.get_admin_accounts_by_account_id(account_id)
