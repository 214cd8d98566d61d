# The client's own tests use the fixtures an integrator's suite uses: the emulator of the run,
# reset before each test (audience_client.pytest_plugin).
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from audience_client import AudienceClient

pytest_plugins = ["audience_client.pytest_plugin"]

SHOP = "com.acme1.sections.user-created.shop"
EMAIL = "com.acme1.keyspaces.email"
POINTS = "com.acme1.attributes.user-created.loyalty-points"


@pytest.fixture
def import_points() -> Callable[[AudienceClient, str], dict[str, Any]]:
    """Imports loyalty points of profiles by email (``"email;points\\r\\n…"``) with a client,
    polling every second with the client's sleep; answers the import's last status."""

    def run(client: AudienceClient, rows: str) -> dict[str, Any]:
        attributes = client.get_audience_sections_attributes(SHOP)["items"]
        points = next(a for a in attributes if a["discriminator"] == POINTS)["versions"][-1]["id"]
        mapping = {
            "keyspace_mapping": {"keyspace_discriminator": EMAIL, "field_selector": "email"},
            "attribute_mappings": [{"field_selector": "points", "attribute_version_id": points}],
        }
        return client.import_profiles(SHOP, mapping, rows, poll_interval=1)

    return run
