"""Problem documents (RFC 9457, ``application/problem+json``) raised as exceptions."""

from __future__ import annotations

from typing import Any

import httpx

# The members every problem document of the service has; the others are its extension fields.
STANDARD_MEMBERS = ("type", "title", "status", "detail", "instance")


class AudienceError(Exception):
    """Anything the client raises about an answer or a connection: the base of its errors."""


class AudienceProblem(AudienceError):
    """An answer of the service that is a problem document.

    ``code`` is the error code (``"AUD-1104"``): the document's ``code`` where it has one, else
    the end of its ``type`` (``/errors/AUD-1104``); ``status``, ``title`` and ``detail`` are the document's; ``fields``
    holds every other member of the document (``status_code``, and whatever a newer service
    adds); ``document`` is the whole document; ``request`` the method and path refused.
    ``PROBLEMS`` of ``audience_client`` gives each known code's status and title.
    """

    code: str
    status: int
    title: str
    detail: str
    fields: dict[str, Any]
    document: dict[str, Any]
    request: str
    response: httpx.Response | None

    def __init__(self, document: dict[str, Any], request: str = "", response: httpx.Response | None = None):
        self.document = dict(document)
        code = document.get("code")
        self.code = code if isinstance(code, str) and code else str(document.get("type", "")).rstrip("/").split("/")[-1]
        status = document.get("status", response.status_code if response is not None else 0)
        self.status = int(status) if isinstance(status, (int, float, str)) and str(status).isdigit() else 0
        self.title = str(document.get("title", ""))
        self.detail = str(document.get("detail", ""))
        self.fields = {k: v for k, v in document.items() if k not in STANDARD_MEMBERS}
        self.request = request
        self.response = response
        where = f"{request}: " if request else ""
        super().__init__(f"{where}{self.status} {self.code} {self.title}: {self.detail}")

    @property
    def retry_after(self) -> str | None:
        """The answer's Retry-After header, if it had one."""
        return self.response.headers.get("retry-after") if self.response is not None else None

    def __reduce__(self):  # picklable (pytest-xdist sends exceptions between processes)
        return (type(self), (self.document, self.request))


class AudienceHTTPError(AudienceError):
    """An error answer that is not a problem document (a proxy's 502 page, say)."""

    def __init__(self, request: str, response: httpx.Response):
        self.request = request
        self.response = response
        self.status = response.status_code
        text = response.text[:500] if response.content else ""
        super().__init__(f"{request}: answered {response.status_code} {text}".rstrip())


def is_problem(response: httpx.Response) -> bool:
    """Whether an answer is a problem document."""
    return response.headers.get("content-type", "").lower().startswith("application/problem+json")


def problem_of(response: httpx.Response, request: str) -> AudienceProblem | AudienceHTTPError:
    """The exception for an error answer: its problem document, else the status and text."""
    if is_problem(response):
        try:
            document = response.json()
        except ValueError:
            document = None
        if isinstance(document, dict):
            return AudienceProblem(document, request, response)
    return AudienceHTTPError(request, response)
