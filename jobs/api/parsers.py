"""Parsers that hand the raw body to the views, so malformed JSON/YAML is reported in the validator's format
(``document_invalid`` / ``yaml_invalid``) instead of DRF's generic parse error."""

from __future__ import annotations

from dataclasses import dataclass

from rest_framework.exceptions import ParseError
from rest_framework.parsers import BaseParser

from jobs.jobspec.document import MAX_TEXT
from rlark_console.jsonbody import read_bounded


@dataclass
class RawBody:
    text: str
    content_type: str
    oversized: bool = False  # a YAML/text body over MAX_TEXT bytes: refused before anything parses it

    @property
    def is_json(self) -> bool:
        return "json" in self.content_type


class _RawParser(BaseParser):
    document_only = True  # the body is one Job document: at most MAX_TEXT bytes (JSON may wrap an RLinf config too)

    def parse(self, stream, media_type=None, parser_context=None):  # noqa: D102
        content_type = (media_type or self.media_type).split(";")[0].strip().lower()
        if self.document_only:
            head = stream.read(MAX_TEXT + 1) if stream is not None else b""
            if len(head) > MAX_TEXT:
                return RawBody("", content_type, oversized=True)
            data = head
        else:
            data = read_bounded(stream)
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            raise ParseError("The body must be UTF-8 text.")
        return RawBody(text, content_type)


class RawJSONParser(_RawParser):
    media_type = "application/json"
    document_only = False


class RawMergePatchParser(_RawParser):
    media_type = "application/merge-patch+json"
    document_only = False


class RawYAMLParser(_RawParser):
    media_type = "application/yaml"


class RawXYAMLParser(_RawParser):
    media_type = "application/x-yaml"


class RawTextYAMLParser(_RawParser):
    media_type = "text/yaml"


class RawPlainParser(_RawParser):
    media_type = "text/plain"


RAW_PARSERS = [RawJSONParser, RawMergePatchParser, RawYAMLParser, RawXYAMLParser, RawTextYAMLParser, RawPlainParser]
