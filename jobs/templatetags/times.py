"""``{{ value|when }}``: a time in the page's zone with its abbreviation (``rlark_console.pagetime``)."""

from __future__ import annotations

from django import template

from rlark_console.pagetime import label

register = template.Library()


@register.filter
def when(value) -> str:
    return label(value)
