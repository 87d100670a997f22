"""The size of a Job document, checked before anything parses it.

A Job document (and an attached RLinf config) is at most ``MAX_TEXT`` bytes, 1 MiB. Parsing a 6 MB YAML takes
many seconds, so every way in (an API body, an uploaded file, a pasted text) looks at the byte count first and
refuses a larger one at once with the validator's own message, ``document_invalid``: "larger than 1 MiB".
"""

from __future__ import annotations

from typing import Protocol

from jobs.jobspec.document import MAX_TEXT
from jobs.jobspec.messages import Problem


class Upload(Protocol):
    """An uploaded file as Django hands it over: its size in bytes, and its content."""

    size: int | None

    def read(self, size: int = -1) -> bytes: ...


def too_large() -> Problem:
    """The problem of a document over ``MAX_TEXT`` bytes (the message ``parse_text`` gives)."""
    return Problem("", "document_invalid", {"detail": "larger than 1 MiB"})


def over_limit(nbytes: int) -> bool:
    """Whether ``nbytes`` bytes are more than a Job document may have."""
    return nbytes > MAX_TEXT


def read_upload(upload: Upload) -> tuple[str | None, Problem | None]:
    """The text of an uploaded document, ``(text, None)``; ``(None, too_large())`` when its declared size or its
    content is over ``MAX_TEXT`` bytes (never more than ``MAX_TEXT + 1`` bytes are read). Undecodable bytes are
    replaced (U+FFFD), as the upload forms did before."""
    if upload.size is not None and over_limit(upload.size):
        return None, too_large()
    data = upload.read(MAX_TEXT + 1)
    if over_limit(len(data)):
        return None, too_large()
    return data.decode("utf-8", "replace"), None
