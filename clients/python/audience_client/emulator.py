"""The emulator (``audience emulate``) for a test suite: started on a free port, its control API as methods.

``Emulator.start()`` runs ``audience emulate`` in a process of its own, waits for the line it
prints once it serves, and answers its address, the ready account and a client of the control
API (``/_emulator/…``: reset, snapshots, clock, jobs, faults, requests, mail, outbound calls,
webhook deliveries, limits), with the shape of the TypeScript control client (``@audience/testing``).
``Emulator.stop()`` ends it and removes the temporary folder it ran in. ``Emulator.connect(url)``
drives one started otherwise (a container). The pytest fixtures of ``audience_client.pytest_plugin``
use both.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import httpx

from .client import AudienceClient, Retry
from .problems import problem_of

__all__ = ["Emulator", "EmulatorAccount", "EmulatorControl", "EmulatorError", "find_command"]


class EmulatorError(RuntimeError):
    """The emulator could not be started or found."""


@dataclass(frozen=True)
class EmulatorAccount:
    """The emulator's ready account, and the operator token."""

    account_id: str
    client_id: str
    client_secret: str
    vendor: str
    region: str
    admin_token: str

    @classmethod
    def of(cls, answer: Mapping[str, Any]) -> EmulatorAccount:
        return cls(**{name: str(answer.get(name, "")) for name in cls.__dataclass_fields__})


def _iso(at: datetime | str) -> str:
    if isinstance(at, datetime):
        if at.tzinfo is None:
            at = at.replace(tzinfo=timezone.utc)
        return at.astimezone(timezone.utc).isoformat().replace("+00:00", "Z")
    return at


def _timestamp(text: str) -> float:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


class _Part:
    def __init__(self, control: EmulatorControl):
        self._control = control


class Clock(_Part):
    """The emulator's clock: every part of the service reads it (tokens, upload windows, expiries)."""

    def now(self) -> dict[str, Any]:
        """``{"now", "frozen"}``."""
        return self._control._clock_answer(self._control.call("GET", "/clock"))

    def set(self, at: datetime | str, *, frozen: bool | None = None) -> dict[str, Any]:
        """Sets the time (``frozen=True`` stops it there); the jobs due by then run before it answers (``jobs_run``)."""
        body: dict[str, Any] = {"now": _iso(at)}
        if frozen is not None:
            body["frozen"] = frozen
        return self._control._clock_answer(self._control.call("PUT", "/clock", body))

    def advance(self, seconds: float) -> dict[str, Any]:
        """Moves the time forward; the jobs due by then run before it answers (``jobs_run``)."""
        return self._control._clock_answer(self._control.call("POST", "/clock/advance", {"seconds": seconds}))


def _query(**values: Any) -> dict[str, Any]:
    return {k: v for k, v in values.items() if v is not None}


class Snapshots(_Part):
    def list(self) -> list[str]:
        """The names of the saved snapshots."""
        return self._control.call("GET", "/snapshots")["items"]

    def __call__(self) -> list[str]:
        """The names of the saved snapshots (as ``list()``)."""
        return self.list()


class Jobs(_Part):
    def run(self) -> int:
        """Runs every job due (imports, exports, mail) until none is left; answers how many ran."""
        return int(self._control.call("POST", "/jobs/run")["jobs_run"])

    def list(self) -> dict[str, Any]:
        """``{"mode", "items"}``: whether jobs run by themselves, and the jobs of the queue, oldest first
        (``job_id``, ``kind``, ``state``: waiting, running or failed, ``attempts``, ``run_at`` …)."""
        return self._control.call("GET", "/jobs")

    def run_one(self, job_id: str) -> None:
        """Runs one waiting job now, due or not."""
        self._control.call("POST", f"/jobs/{job_id}/run")

    def hold(self, job_id: str) -> None:
        """Begins one waiting job and holds it before it reads its account (an import or an export is
        ``in_progress`` then) until ``release(job_id)``: a poll loop sees queued, in_progress, done."""
        self._control.call("POST", f"/jobs/{job_id}/run", {"hold": True})

    def release(self, job_id: str) -> None:
        """Lets a held job go on; answers once it ended."""
        self._control.call("POST", f"/jobs/{job_id}/release")

    def set_mode(self, mode: str) -> None:
        """``"manual"``: jobs wait until they are run; ``"automatic"``: they run shortly after they are due. A reset brings back the start's."""
        self._control.call("PUT", "/jobs", {"mode": mode})


class Faults(_Part):
    """Faults for the next requests on a path: ``add(path="/audience/*", status=503, times=2, retry_after=1)``."""

    def add(self, path: str, *, method: str | None = None, times: int | None = None, **fault: Any) -> dict[str, Any]:
        """Adds a fault (``status``, ``retry_after``, ``drop``, ``delay_ms``, as docs/emulator.md says); answers it with its ``id``."""
        body: dict[str, Any] = {"path": path, **fault}
        if method is not None:
            body["method"] = method
        if times is not None:
            body["times"] = times
        return self._control.call("POST", "/faults", body)

    def list(self) -> list[dict[str, Any]]:
        return self._control.call("GET", "/faults")["items"]

    def clear(self) -> None:
        self._control.call("DELETE", "/faults")


class Requests(_Part):
    """The requests the emulator received (its control API's own are not kept), oldest first."""

    def list(
        self,
        *,
        method: str | None = None,
        path: str | None = None,
        since: datetime | str | None = None,
        after: int | None = None,
        limit: int | None = None,
    ) -> list[dict[str, Any]]:
        query = {"method": method, "path": path, "since": _iso(since) if since else None, "after": after, "limit": limit}
        return self._control.call("GET", "/requests", query={k: v for k, v in query.items() if v is not None})["items"]

    def clear(self) -> None:
        self._control.call("DELETE", "/requests")


class OutboundFaults(_Part):
    """Faults of the next outbound calls: ``add(kind="webhook", status=503)``, ``add(target="http://127.0.0.1:*", refuse=True)``."""

    def add(self, *, times: int | None = None, **fault: Any) -> dict[str, Any]:
        """Adds a fault (``kind``, ``target``, ``status``, ``refuse``, ``delay_ms``, ``probability``); answers it with its ``id``."""
        return self._control.call("POST", "/outbound/faults", {**fault, **_query(times=times)})

    def list(self) -> list[dict[str, Any]]:
        return self._control.call("GET", "/outbound/faults")["items"]

    def clear(self) -> None:
        self._control.call("DELETE", "/outbound/faults")


class Outbound(_Part):
    """The calls the service made to targets outside it (callbacks, mail, webhook deliveries), oldest first, with their answers."""

    def __init__(self, control: EmulatorControl):
        super().__init__(control)
        self.faults = OutboundFaults(control)

    def list(
        self, *, kind: str | None = None, target: str | None = None, after: int | None = None, limit: int | None = None
    ) -> list[dict[str, Any]]:
        query = _query(kind=kind, target=target, after=after, limit=limit)
        return self._control.call("GET", "/outbound", query=query)["items"]

    def clear(self) -> None:
        self._control.call("DELETE", "/outbound")


class Webhooks(_Part):
    def list(
        self, *, url: str | None = None, type: str | None = None, after: int | None = None, limit: int | None = None
    ) -> list[dict[str, Any]]:
        """The webhook deliveries attempted, oldest first (``url``, ``event_id``, ``type``, ``headers``, ``body``, ``answer`` …):
        to endpoints matching ``url`` (``*``: any characters), of an event ``type``, after an id; ``limit``: the last n."""
        query = _query(url=url, type=type, after=after, limit=limit)
        return self._control.call("GET", "/webhooks", query=query)["items"]


class Mail(_Part):
    def list(self, *, to: str | None = None, limit: int | None = None) -> list[dict[str, Any]]:
        """The messages the ready account's transactional sends sent, newest first, decoded, with their links."""
        query = {"to": to, "limit": limit}
        return self._control.call("GET", "/mail", query={k: v for k, v in query.items() if v is not None})["items"]


class Limits(_Part):
    def get(self) -> dict[str, int | None]:
        return self._control.call("GET", "/limits")

    def set(self, **limits: int | None) -> dict[str, int | None]:
        """Sets limits of the ready account (None lifts one): ``set(requests_per_second=1)``; a reset brings back the emulator's."""
        return self._control.call("PATCH", "/limits", limits)


class EmulatorControl:
    """The control API of the emulator at ``base_url`` (``/_emulator/…``), as methods.

    A refusal is raised as ``AudienceProblem`` (with its ``AUD-22xx`` code). ``time()`` is the
    emulator's time as the last clock call left it (the system's otherwise): a client whose
    ``now`` it is renews its tokens by the emulator's clock.
    """

    def __init__(self, base_url: str, *, timeout: float = 60.0):
        self.base_url = base_url.rstrip("/")
        self._http = httpx.Client(timeout=timeout)
        # The emulator's time minus the system's, and the time it stands at when frozen.
        self._offset = 0.0
        self._frozen_at: float | None = None
        self.clock = Clock(self)
        self.jobs = Jobs(self)
        self.faults = Faults(self)
        self.requests = Requests(self)
        self.mail = Mail(self)
        self.outbound = Outbound(self)
        self.webhooks = Webhooks(self)
        self.snapshots = Snapshots(self)
        self.limits = Limits(self)

    def call(self, method: str, path: str, body: Any = None, *, query: Mapping[str, Any] | None = None) -> Any:
        """One call of the control API; answers its JSON (None for 204)."""
        request = f"{method} /_emulator{path}"
        response = self._http.request(
            method,
            f"{self.base_url}/_emulator{path}",
            params={k: str(v) for k, v in (query or {}).items()},
            **({} if body is None else {"json": body}),
        )
        if response.is_error:
            raise problem_of(response, request)
        return response.json() if response.content else None

    def close(self) -> None:
        self._http.close()

    def account(self) -> EmulatorAccount:
        """The ready account (``GET /_emulator/account``)."""
        return EmulatorAccount.of(self.call("GET", "/account"))

    def reset(self, snapshot: str | None = None) -> None:
        """Back to the state the emulator started in (or to a snapshot saved with ``snapshot(name)``): data, files, clock, faults, request log, limits."""
        self.call("POST", "/reset", None if snapshot is None else {"snapshot": snapshot})
        self._offset, self._frozen_at = 0.0, None

    def snapshot(self, name: str) -> None:
        """Saves the current state (data and files) under ``name`` (``a-z``, digits, ``_``) for ``reset(name)``."""
        self.call("PUT", f"/snapshots/{name}")

    def time(self) -> float:
        """The emulator's time in seconds (as ``time.time()``), as the last clock call through this client left it."""
        return self._frozen_at if self._frozen_at is not None else time.time() + self._offset

    def sleep(self, seconds: float) -> None:
        """Spends ``seconds`` on the emulator's clock instead of waiting: advances it, which runs the jobs due by then."""
        self.clock.advance(seconds)

    def _clock_answer(self, answer: dict[str, Any]) -> dict[str, Any]:
        at = _timestamp(answer["now"])
        self._frozen_at = at if answer.get("frozen") else None
        self._offset = at - time.time()
        return answer


def find_command() -> list[str]:
    """The ``audience`` program to run: ``AUDIENCE_COMMAND`` (split on spaces), else the repository's
    ``bin/audience`` beside this package, else ``node_modules/.bin/audience`` below the current
    folder, else ``audience`` on the PATH."""
    if os.environ.get("AUDIENCE_COMMAND"):
        return os.environ["AUDIENCE_COMMAND"].split()
    here = Path(__file__).resolve().parent
    for candidate in (here.parents[2] / "bin" / "audience", Path.cwd() / "node_modules" / ".bin" / "audience"):
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return [str(candidate)]
    found = shutil.which("audience")
    if found:
        return [found]
    raise EmulatorError(
        "no audience program: set AUDIENCE_COMMAND to the path of bin/audience of an audience checkout "
        "(or install audience with npm in this project)"
    )


def _parent_death_signal() -> Callable[[], None] | None:
    """On Linux, what the child runs before it executes the emulator: it gets SIGTERM if the test process dies.

    Prepared here, in the parent: between fork and exec the child may take no lock (no import).
    """
    try:
        import ctypes

        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):  # not Linux: the fixture's stop is the only clean-up
        return None
    PR_SET_PDEATHSIG = 1
    return lambda: prctl(PR_SET_PDEATHSIG, int(signal.SIGTERM))


class Emulator:
    """A running emulator: ``base_url``, ``account``, ``control``, ``client()``, ``stop()``."""

    def __init__(
        self,
        base_url: str,
        account: EmulatorAccount,
        *,
        process: subprocess.Popen[str] | None = None,
        folder: str | None = None,
        output: deque[str] | None = None,
        threads: Sequence[threading.Thread] = (),
    ):
        self.base_url = base_url.rstrip("/")
        self.account = account
        self.control = EmulatorControl(self.base_url)
        self.process = process
        self._folder = folder
        self._output = output if output is not None else deque(maxlen=200)
        self._threads = list(threads)

    @classmethod
    def start(
        cls,
        *,
        vendor: str | None = None,
        manifest: str | os.PathLike[str] | None = None,
        env: Mapping[str, str] | None = None,
        command: Sequence[str] | None = None,
        timeout: float = 120.0,
    ) -> Emulator:
        """Starts ``audience emulate`` on a free port of 127.0.0.1 and waits until it serves.

        ``vendor``: the vendor word of the ready account's identifiers (``com.<vendor>1.…``);
        ``manifest``: a manifest file of its definitions instead of the demo's; ``env``: more
        environment (``DATABASE_URL`` …); ``command``: the program (``find_command()``);
        ``timeout``: seconds to wait (the first start on a machine prepares the database).
        The emulator runs with a temporary folder of its own, removed by ``stop()``.
        """
        program = list(command) if command is not None else find_command()
        args = [*program, "emulate", *(["--manifest", os.fspath(manifest)] if manifest is not None else [])]
        folder = tempfile.mkdtemp(prefix="audience-emulator-py-")
        environment = {
            **os.environ,
            "PORT": "0",
            "HOST": "127.0.0.1",
            "LOG_LEVEL": "warn",
            "TMPDIR": folder,
            **({"VENDOR": vendor} if vendor else {}),
            **(env or {}),
        }
        try:
            process = subprocess.Popen(
                args,
                env=environment,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                preexec_fn=_parent_death_signal() if os.name == "posix" else None,
            )
        except OSError as error:
            shutil.rmtree(folder, ignore_errors=True)
            raise EmulatorError(f"could not run {' '.join(args)}: {error}") from error
        output: deque[str] = deque(maxlen=200)
        ready: list[dict[str, Any]] = []
        seen = threading.Event()

        def read_stdout() -> None:
            assert process.stdout is not None
            for line in process.stdout:
                if not ready and '"emulator":"ready"' in line:
                    ready.append(json.loads(line))
                    seen.set()
                else:
                    output.append(line)
            seen.set()  # the output ended: the process exited

        def read_stderr() -> None:
            assert process.stderr is not None
            for line in process.stderr:
                output.append(line)

        threads = [threading.Thread(target=f, daemon=True) for f in (read_stdout, read_stderr)]
        for thread in threads:
            thread.start()
        emulator = None
        try:
            if not seen.wait(timeout) or not ready:
                why = "did not start within %s seconds" % timeout if not seen.is_set() else "exited before serving"
                raise EmulatorError(f"the emulator ({' '.join(args)}) {why}:\n{''.join(output)}")
            answer = ready[0]
            emulator = cls(
                answer["url"],
                EmulatorAccount.of(answer),
                process=process,
                folder=folder,
                output=output,
                threads=threads,
            )
            return emulator
        finally:
            if emulator is None:
                _end(process, threads)
                shutil.rmtree(folder, ignore_errors=True)

    @classmethod
    def connect(cls, base_url: str) -> Emulator:
        """An emulator started otherwise (a container, another process): ``stop()`` leaves it running."""
        control = EmulatorControl(base_url)
        try:
            account = control.account()
        finally:
            control.close()
        return cls(base_url, account)

    @property
    def output(self) -> str:
        """The emulator's last lines of output (its log: warnings and errors)."""
        return "".join(self._output)

    def client(
        self,
        *,
        on_emulator_clock: bool = True,
        retry: Retry | None = None,
        sleep: Callable[[float], None] | None = None,
        **options: Any,
    ) -> AudienceClient:
        """A client of the ready account (with its operator token for ``/admin``).

        With ``on_emulator_clock`` (the default), the client's time is the emulator's
        (``control.time``) and its waits, before a retry or between polls, advance the
        emulator's clock instead of passing (which runs the jobs due by then): a test neither
        sleeps nor depends on how fast the machine is. ``sleep`` replaces that wait.
        """
        if on_emulator_clock:
            options.setdefault("now", self.control.time)
            options["sleep"] = sleep if sleep is not None else self.control.sleep
        elif sleep is not None:
            options["sleep"] = sleep
        return AudienceClient(
            self.base_url,
            self.account.client_id,
            self.account.client_secret,
            admin_token=self.account.admin_token,
            retry=retry,
            **options,
        )

    def token(self) -> str:
        """A new access token of the ready account."""
        response = httpx.post(
            f"{self.base_url}/oauth/token",
            json={
                "grant_type": "client_credentials",
                "client_id": self.account.client_id,
                "client_secret": self.account.client_secret,
            },
        )
        if response.is_error:
            raise problem_of(response, "POST /oauth/token")
        return str(response.json()["access_token"])

    def stop(self) -> None:
        """Ends the emulator (SIGTERM, then SIGKILL after 30 seconds) and removes its temporary folder; again does nothing."""
        self.control.close()
        if self.process is not None:
            _end(self.process, self._threads)
        if self._folder is not None:
            shutil.rmtree(self._folder, ignore_errors=True)
            self._folder = None

    def __enter__(self) -> Emulator:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _end(process: subprocess.Popen[str], threads: Sequence[threading.Thread]) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
    for thread in threads:
        thread.join(5)
    for stream in (process.stdout, process.stderr):
        if stream is not None:
            stream.close()

