"""A typed Python client of the audience HTTP interface, generated from its OpenAPI document.

``AudienceClient`` has one method per operation (``models`` holds the TypedDicts of their bodies
and answers), fetches and renews its tokens, sends requests again on 429, 502, 503, 504 and
dropped connections (``Retry``), and raises problem documents as ``AudienceProblem``.
``Emulator`` runs ``audience emulate`` for a test suite, and makes ``Namespace``s, accounts of one
test each, for parallel workers; ``audience_client.pytest_plugin`` gives pytest fixtures of both. ``verify_webhook`` checks a webhook delivery's signature.
"""

from .client import AudienceClient, ImportFailed, Retry, retry_delay
from .emulator import Emulator, EmulatorAccount, EmulatorControl, EmulatorError, Namespace, NamespaceControl
from .models import PROBLEMS
from .problems import AudienceError, AudienceHTTPError, AudienceProblem
from .webhooks import WebhookVerificationError, verify_webhook

__all__ = [
    "AudienceClient",
    "AudienceError",
    "AudienceHTTPError",
    "AudienceProblem",
    "Emulator",
    "EmulatorAccount",
    "EmulatorControl",
    "EmulatorError",
    "ImportFailed",
    "Namespace",
    "NamespaceControl",
    "PROBLEMS",
    "Retry",
    "WebhookVerificationError",
    "retry_delay",
    "verify_webhook",
]

__version__ = "0.1.0"
