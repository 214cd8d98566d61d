"""The client of one API key: the generated operations, with tokens, retries and problems taken care of."""

from __future__ import annotations

import email.utils
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import IO, Any, Literal, cast
from urllib.parse import quote, urlsplit

import httpx

from .models import ImportCreated, ImportStatus
from .operations import Operations
from .problems import AudienceError, is_problem, problem_of

__all__ = ["AudienceClient", "Retry", "retry_delay", "ImportFailed"]

# What a dropped connection looks like to httpx: refused, reset, closed without an answer.
DROPPED = (httpx.ConnectError, httpx.ReadError, httpx.WriteError, httpx.RemoteProtocolError)


@dataclass(frozen=True)
class Retry:
    """When and how often a request is sent again.

    ``attempts`` is how many times a request is sent again after the first (0: never);
    ``statuses`` the answers sent again; ``dropped_connections`` whether a connection refused,
    reset or closed without an answer is tried again (a request the service may have received:
    a write sent again may be applied twice); the wait is what the answer's ``Retry-After``
    asks for (seconds or an HTTP date), else ``backoff`` seconds doubling at each attempt,
    never more than ``max_delay`` seconds.
    """

    attempts: int = 4
    statuses: frozenset[int] = field(default_factory=lambda: frozenset({429, 502, 503, 504}))
    dropped_connections: bool = True
    backoff: float = 0.5
    max_delay: float = 60.0

    def __post_init__(self) -> None:
        object.__setattr__(self, "statuses", frozenset(self.statuses))
        if self.attempts < 0:
            raise ValueError("Retry.attempts is 0 or more")


def retry_delay(retry_after: str | None, attempt: int, now: float, backoff: float = 0.5) -> float:
    """Seconds to wait before trying again: Retry-After (seconds or an HTTP date), else a doubling backoff."""
    if retry_after is not None and retry_after.strip():
        value = retry_after.strip()
        try:
            return max(0.0, float(value))
        except ValueError:
            pass
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError):
            when = None
        if when is not None:
            return max(0.0, when.timestamp() - now)
    return backoff * 2**attempt


class ImportFailed(AudienceError):
    """An import that ended in ``error``; ``status`` is its last status."""

    def __init__(self, status: ImportStatus):
        self.status = status
        super().__init__(f"import {status['import_id']} failed: {status['result'].get('message', '')}")


_ABSENT: Any = object()


class AudienceClient(Operations):
    """A client of the audience HTTP interface for one API key.

    Every operation of the service's OpenAPI document is a method (``get_audience_sections()``,
    ``post_v2_audience_keyspaces_profiles_sections_consents(...)``), typed with the TypedDicts of
    ``audience_client.models``. Problem documents are raised as ``AudienceProblem``.

    Args:
        base_url: the service's address (its PUBLIC_URL), such as ``https://cdp.shop.example``.
        client_id, client_secret: an API key's credentials, exchanged for tokens.
        admin_token: the operator token, for the operator operations (``/admin/…``).
        retry: when requests are sent again (``Retry()``: 4 times on 429, 502, 503, 504 and
            dropped connections); ``Retry(attempts=0)`` never.
        renew_before: seconds before a token expires at which the next one is fetched (60).
        timeout: seconds to wait for the service (30).
        now: the time in seconds (``time.time``): a test moves it with the service's clock.
        sleep: how a wait before a retry or a poll is spent (``time.sleep``): a test can move
            the emulator's clock instead.
        http: an ``httpx.Client`` of your own (proxies, certificates); closed by ``close()``.
    """

    def __init__(
        self,
        base_url: str,
        client_id: str | None = None,
        client_secret: str | None = None,
        *,
        admin_token: str | None = None,
        retry: Retry | None = None,
        renew_before: float = 60.0,
        timeout: float = 30.0,
        now: Callable[[], float] = time.time,
        sleep: Callable[[float], None] = time.sleep,
        http: httpx.Client | None = None,
    ):
        self.base_url = base_url.rstrip("/")
        self.client_id = client_id
        self.client_secret = client_secret
        self.admin_token = admin_token
        self.retry = retry if retry is not None else Retry()
        self.renew_before = renew_before
        self._now = now
        self._sleep = sleep
        self._http = http if http is not None else httpx.Client(timeout=timeout)
        # The token held and when it expires; one thread fetches while the others wait for it.
        self._token: tuple[str, float] | None = None
        self._token_lock = threading.Lock()

    # -- the client's life -------------------------------------------------------------------

    def close(self) -> None:
        """Closes the connections."""
        self._http.close()

    def __enter__(self) -> AudienceClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- tokens ----------------------------------------------------------------------------

    def token(self) -> str:
        """A valid access token: the one held, or a new one when it expires within ``renew_before`` seconds."""
        held = self._token
        if held is not None and self._now() < held[1] - self.renew_before:
            return held[0]
        with self._token_lock:
            held = self._token
            if held is not None and self._now() < held[1] - self.renew_before:
                return held[0]
            return self._fetch_token()

    def _fetch_token(self) -> str:
        if not self.client_id or not self.client_secret:
            raise AudienceError("this operation needs an access token: give the client client_id and client_secret")
        response = self._send(
            "POST",
            f"{self.base_url}/oauth/token",
            json={
                "grant_type": "client_credentials",
                "client_id": self.client_id,
                "client_secret": self.client_secret,
            },
        )
        if response.is_error:
            raise problem_of(response, "POST /oauth/token")
        answer = response.json()
        self._token = (answer["access_token"], self._now() + float(answer["expires_in"]))
        return cast(str, answer["access_token"])

    def forget_token(self) -> None:
        """Drops the token held: the next call fetches a new one."""
        self._token = None

    # -- sending ---------------------------------------------------------------------------

    def _send(self, method: str, url: str, **options: Any) -> httpx.Response:
        """Sends a request, and again while its answer or its connection failure is one to retry."""
        policy = self.retry
        for attempt in range(policy.attempts + 1):
            last = attempt >= policy.attempts
            try:
                response = self._http.request(method, url, **options)
            except DROPPED:
                if last or not policy.dropped_connections:
                    raise
                self._sleep(min(policy.backoff * 2**attempt, policy.max_delay))
                continue
            if last or response.status_code not in policy.statuses:
                return response
            wait = retry_delay(response.headers.get("retry-after"), attempt, self._now(), policy.backoff)
            response.close()
            self._sleep(min(wait, policy.max_delay))
        raise AssertionError("unreachable")

    def _request(
        self,
        method: str,
        route: str,
        *,
        path: Mapping[str, Any] | None = None,
        query: Mapping[str, Any] | None = None,
        body: Any = _ABSENT,
        headers: Mapping[str, str] | None = None,
        auth: Literal["api", "operator"] | None = "api",
        raw: bool = False,
    ) -> Any:
        """Calls one operation: `route` with its `path` parameters filled in; answers the JSON, None, or the response when `raw`."""
        target = route.format_map({k: quote(str(v), safe="") for k, v in (path or {}).items()})
        params = [(k, v) for k, value in (query or {}).items() for v in _query_values(value)]
        sent = dict(headers or {})
        options: dict[str, Any] = {"params": params, "headers": sent}
        if body is not _ABSENT and body is not None:
            options["json"] = body
        request = f"{method} {target}"
        url = self.base_url + target
        if auth == "operator":
            if not self.admin_token:
                raise AudienceError(f"{request} is an operator operation: give the client admin_token")
            sent.setdefault("authorization", f"Bearer {self.admin_token}")
        elif auth == "api" and not _has_authorization(sent):
            sent["authorization"] = f"Bearer {self.token()}"
            response = self._send(method, url, **options)
            if response.status_code == 401 and self._token is not None:
                # A token refused before its time (a deleted key, a moved clock): once more with a new one.
                self._token = None
                sent["authorization"] = f"Bearer {self.token()}"
                response = self._send(method, url, **options)
            return self._answer(response, request, raw)
        return self._answer(self._send(method, url, **options), request, raw)

    @staticmethod
    def _answer(response: httpx.Response, request: str, raw: bool) -> Any:
        if response.is_error or is_problem(response):
            raise problem_of(response, request)
        if raw:
            return response
        if response.status_code == 204 or not response.content:
            return None
        if "json" in response.headers.get("content-type", ""):
            return response.json()
        return response

    # -- imports and exports ---------------------------------------------------------------

    def import_profiles(
        self,
        section: str,
        request: Mapping[str, Any],
        file: str | bytes | IO[bytes] | IO[str],
        *,
        poll_interval: float = 1.0,
        timeout: float = 600.0,
        raise_on_error: bool = True,
    ) -> ImportStatus:
        """Requests an import (version 2), uploads its file with the signed form, and waits for its end.

        ``request`` is the body of ``POST /v2/audience/sections/{section}/imports`` (the keyspace
        mapping and the mappings of attributes, tags and consents); ``file`` the CSV, as text,
        bytes or a file. Polls every ``poll_interval`` seconds (spent with the client's
        ``sleep``) until the import completed, and answers its status; one that ended in error
        raises ``ImportFailed`` (or is answered, with ``raise_on_error=False``).
        """
        created = cast(
            ImportCreated,
            self._request("POST", "/v2/audience/sections/{section}/imports", path={"section": section}, body=request),
        )
        content = file if isinstance(file, (str, bytes)) else file.read()
        data = content.encode() if isinstance(content, str) else content
        # The upload form carries its own credential (its signature): no bearer token; its fields in order, then the file.
        uploaded = self._send(
            "POST",
            created["file_upload_url"],
            data=dict(created["file_upload_body"]),
            files={"file": ("import.csv", data, "text/csv")},
        )
        self._answer(uploaded, f"POST {urlsplit(created['file_upload_url']).path}", raw=True)
        route = "/audience/sections/{section}/imports/{import_id}"
        ids = {"section": section, "import_id": created["import_id"]}

        def done() -> ImportStatus | None:
            status = cast(ImportStatus, self._request("GET", route, path=ids))
            return status if status["result"]["status"] in ("completed", "error") else None

        status = self.wait_for(done, f"import {created['import_id']}", poll_interval=poll_interval, timeout=timeout)
        if raise_on_error and status["result"]["status"] == "error":
            raise ImportFailed(status)
        return status

    def export_file(
        self,
        route: str,
        body: Mapping[str, Any],
        *,
        accept: str | None = None,
        poll_interval: float = 1.0,
        timeout: float = 600.0,
    ) -> httpx.Response:
        """Requests an export or a count (``route``: ``/audience/profiles/reports/segments``,
        ``/audience/profiles/exports`` …), waits until it is ready, and answers its file: the
        response, its body read (``.text``, ``.content``, ``.json()``). ``accept`` chooses the
        format where the export has several (Excel, JSON)."""
        created = self._request("POST", route, body=body)
        url = created.get("file_download_url_v2") or created.get("poll_url") or created.get("file_download_url")
        report_id = urlsplit(url).path.rstrip("/").split("/")[-1]
        headers = {"accept": accept} if accept else None

        def ready() -> httpx.Response | None:
            response = cast(
                httpx.Response,
                self._request(
                    "GET", "/v2/audience/profiles/reports/{id}", path={"id": report_id}, headers=headers, raw=True
                ),
            )
            return response if response.status_code == 200 else None

        return self.wait_for(ready, f"export {report_id}", poll_interval=poll_interval, timeout=timeout)

    def wait_for(
        self, poll: Callable[[], Any], what: str, *, poll_interval: float = 1.0, timeout: float = 600.0
    ) -> Any:
        """Calls ``poll`` until it answers something other than None, spending ``poll_interval`` with the client's sleep between calls."""
        deadline = self._now() + timeout
        while True:
            result = poll()
            if result is not None:
                return result
            if self._now() > deadline:
                raise AudienceError(f"{what} is not done after {timeout} seconds")
            self._sleep(poll_interval)


def _has_authorization(headers: Mapping[str, str]) -> bool:
    return any(k.lower() == "authorization" for k in headers)


def _query_values(value: Any) -> Iterable[str]:
    """A query parameter's values as the service reads them: booleans as true/false, lists repeated, None left out."""
    if value is None:
        return []
    if isinstance(value, bool):
        return ["true" if value else "false"]
    if isinstance(value, (list, tuple)):
        return [v for item in value for v in _query_values(item)]
    return [str(value)]

