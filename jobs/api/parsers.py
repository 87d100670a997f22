"""Parsers that hand the raw body to the views, so malformed JSON/YAML is reported in the validator's format
(``document_invalid`` / ``yaml_invalid``) instead of DRF's generic parse error."""

from __future__ import annotations

from dataclasses import dataclass

from rest_framework.exceptions import ParseError
from rest_framework.parsers import BaseParser

from rlark_console.jsonbody import read_bounded


@dataclass
class RawBody:
    text: str
    content_type: str

    @property
    def is_json(self) -> bool:
        return "json" in self.content_type


class _RawParser(BaseParser):
    def parse(self, stream, media_type=None, parser_context=None):  # noqa: D102
        data = read_bounded(stream)
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            raise ParseError("The body must be UTF-8 text.")
        return RawBody(text, (media_type or self.media_type).split(";")[0].strip().lower())


class RawJSONParser(_RawParser):
    media_type = "application/json"


class RawMergePatchParser(_RawParser):
    media_type = "application/merge-patch+json"


class RawYAMLParser(_RawParser):
    media_type = "application/yaml"


class RawXYAMLParser(_RawParser):
    media_type = "application/x-yaml"


class RawTextYAMLParser(_RawParser):
    media_type = "text/yaml"


class RawPlainParser(_RawParser):
    media_type = "text/plain"


RAW_PARSERS = [RawJSONParser, RawMergePatchParser, RawYAMLParser, RawXYAMLParser, RawTextYAMLParser, RawPlainParser]
