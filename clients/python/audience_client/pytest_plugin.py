"""pytest fixtures of the audience emulator.

Load it in a ``conftest.py`` with ``pytest_plugins = ["audience_client.pytest_plugin"]`` (an
installed ``audience-client`` loads it by itself). It gives:

- ``audience_emulator`` (session): an ``Emulator`` started once for the run on a free port of
  127.0.0.1 (``bin/audience emulate``), stopped at the end of the run, its temporary folder
  removed, whether the tests passed or failed. With ``AUDIENCE_EMULATOR_URL`` set, the emulator
  at that address instead (a container), left running.
- ``audience_control`` (each test): the emulator's control API, after a reset: every test starts
  from the emulator's first state (or from the snapshot ``audience_snapshot`` names).
- ``audience_client`` (each test): an ``AudienceClient`` of the ready account on the emulator's
  clock (its waits advance the clock), after the same reset; closed after the test.
- ``audience_namespace`` (each test): a new ``Namespace`` of the emulator, without a reset: an
  account of the emulator's fixture for the test alone, with its own key, data, request log, mail,
  outbound calls and faults (its ``control``). Parallel workers (pytest-xdist, or several runs)
  given one emulator's address in ``AUDIENCE_EMULATOR_URL`` share it without seeing each other's
  work; the clock stays the emulator's, one for all.
- ``audience_namespace_client`` (each test): an ``AudienceClient`` of that namespace's account,
  its waits real ones (the clock is shared); closed after the test.

Settings, in pytest's configuration (``[tool.pytest.ini_options]``, ``pytest.ini``) or the
environment: ``audience_vendor`` / ``AUDIENCE_VENDOR`` (the vendor word of identifiers),
``audience_manifest`` / ``AUDIENCE_MANIFEST`` (a manifest file of the ready account),
``audience_start_timeout`` (seconds, 120), ``AUDIENCE_COMMAND`` (the ``audience`` program).
"""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Iterator

import pytest

from .client import AudienceClient
from .emulator import Emulator, EmulatorControl, Namespace


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addini("audience_vendor", "vendor word of the emulator's identifiers (com.<vendor>1.…)", default="")
    parser.addini("audience_manifest", "manifest file of the emulator's ready account", default="")
    parser.addini("audience_start_timeout", "seconds to wait for the emulator to serve", default="120")
    parser.addini("audience_snapshot", "snapshot each test starts from (instead of the first state)", default="")


def _setting(config: pytest.Config, name: str) -> str:
    return os.environ.get(name.upper(), "") or str(config.getini(name) or "")


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


@contextlib.contextmanager
def _terminate_as_interrupt() -> Iterator[None]:
    """While the emulator runs, SIGTERM (a CI job cancelled, a timeout) interrupts the run as Ctrl-C
    does, so that pytest tears the fixtures down and the emulator is stopped and its folder removed."""
    try:
        previous = signal.signal(signal.SIGTERM, _interrupt) if signal.getsignal(signal.SIGTERM) == signal.SIG_DFL else None
    except ValueError:  # not the main thread
        previous = None
    try:
        yield
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)


@pytest.fixture(scope="session")
def audience_emulator(pytestconfig: pytest.Config) -> Iterator[Emulator]:
    """The emulator of the test run: started once, stopped and cleaned up at its end."""
    url = os.environ.get("AUDIENCE_EMULATOR_URL")
    with _terminate_as_interrupt():
        if url:
            emulator = Emulator.connect(url)
        else:
            manifest = _setting(pytestconfig, "audience_manifest")
            emulator = Emulator.start(
                vendor=_setting(pytestconfig, "audience_vendor") or None,
                manifest=manifest or None,
                timeout=float(pytestconfig.getini("audience_start_timeout") or 120),
            )
        try:
            yield emulator
        finally:
            emulator.stop()


@pytest.fixture
def audience_control(audience_emulator: Emulator, pytestconfig: pytest.Config) -> EmulatorControl:
    """The emulator's control API, the emulator reset before the test."""
    control = audience_emulator.control
    control.reset(pytestconfig.getini("audience_snapshot") or None)
    return control


@pytest.fixture
def audience_client(audience_emulator: Emulator, audience_control: EmulatorControl) -> Iterator[AudienceClient]:
    """A client of the emulator's ready account on the emulator's clock, the emulator reset before the test."""
    client = audience_emulator.client()
    try:
        yield client
    finally:
        client.close()


@pytest.fixture
def audience_namespace(audience_emulator: Emulator) -> Iterator[Namespace]:
    """A new namespace of the emulator for the test (its reset: the fixture's state, other tests' left alone)."""
    with audience_emulator.namespace() as namespace:
        yield namespace


@pytest.fixture
def audience_namespace_client(audience_namespace: Namespace) -> Iterator[AudienceClient]:
    """A client of the test's namespace; its waits pass (the emulator's clock is shared)."""
    client = audience_namespace.client()
    try:
        yield client
    finally:
        client.close()
