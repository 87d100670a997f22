"""Request bodies every API view can rely on (odd JSON must be a 400, never a 500).

- ``rlark_console.jsontext.loads`` parses JSON of bounded nesting depth: ``[[[[...]]]]`` 10,000 deep is a
  ``ValueError``, not a RecursionError.
- :class:`ObjectJSONParser` is the project's default DRF JSON parser: bounded body, :func:`loads`, and the top
  level must be an object (``[null, null]`` -> 400 "must be a JSON object").
- :func:`flat_fields` turns request data (form QueryDict or JSON object) into ``{field: str | bool | None}``
  for the admin create/update services: numbers become strings, a nested list/object is a 400 naming the field.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.utils.translation import gettext as _
from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser, MultiPartParser

from rlark_console.jsontext import loads
from rlark_console.nul import NUL_MESSAGE, has_nul


def max_body_bytes() -> int:
    """Largest request body a parser reads: ``DATA_UPLOAD_MAX_MEMORY_SIZE`` (Django's 2.5 MB by default)."""
    return int(getattr(settings, "DATA_UPLOAD_MAX_MEMORY_SIZE", None) or 2_621_440)


def read_bounded(stream) -> bytes:
    """The whole body, or ParseError (400) when it is larger than :func:`max_body_bytes`."""
    limit = max_body_bytes()
    data = stream.read(limit + 1) if stream is not None else b""
    if len(data) > limit:
        raise ParseError(_("The request body is larger than %(limit)d bytes.") % {"limit": limit})
    return data


class ObjectJSONParser(JSONParser):
    """``application/json`` whose top level is an object; 400 (localized) for anything else."""

    def parse(self, stream, media_type=None, parser_context=None):  # noqa: D102
        raw = read_bounded(stream)
        if not raw.strip():
            return {}
        try:
            data = loads(raw)
        except (ValueError, UnicodeDecodeError) as exc:
            raise ParseError(_("The request body is not valid JSON: %(detail)s") % {"detail": exc}) from exc
        if not isinstance(data, dict):
            raise ParseError(_("The request body must be a JSON object."))
        if has_nul(data):
            raise ParseError(_(NUL_MESSAGE))
        return data


def flat_fields(data: Any, *, keep: tuple[str, ...] = ()) -> dict[str, Any]:
    """Request data -> ``{field: str | bool | None | uploaded file}``. ``keep``: fields whose nested value the
    service validates itself (e.g. a cluster's inline ``nodes``). Raises ParseError (400) for a non-object body
    or another nested value."""
    if hasattr(data, "dict"):
        data = data.dict()
    if not isinstance(data, dict):
        raise ParseError(_("The request body must be a JSON object."))
    out: dict[str, Any] = {}
    for key, value in data.items():
        if isinstance(value, str) and "\x00" in value:
            raise ParseError(_(NUL_MESSAGE))
        if key in keep or value is None or isinstance(value, bool | str):
            out[key] = value
        elif isinstance(value, int | float):
            out[key] = str(value)
        elif isinstance(value, list | dict):
            raise ParseError(_("The field “%(field)s” must be a string.") % {"field": key})
        else:  # an uploaded file of a multipart form
            out[key] = value
    return out


class NulCheckingMultiPartParser(MultiPartParser):
    """``multipart/form-data`` whose text fields carry no NUL (PostgreSQL cannot store U+0000): 400, never a 500.
    File parts are left alone (their bytes are the user's data)."""

    def parse(self, stream, media_type=None, parser_context=None):  # noqa: D102
        parsed = super().parse(stream, media_type, parser_context)
        if any("\x00" in key or "\x00" in value for key, values in parsed.data.lists() for value in values):
            raise ParseError(_(NUL_MESSAGE))
        return parsed
