"""``{{ job.phase|state_word }}``: a Job's, Task's, Pod's or Worker's state in the page's language, from the one
table of state words (``jobs.observe.state_words``), so every page and tab names a state the same."""

from __future__ import annotations

from django import template

from jobs.observe.state_words import state_label

register = template.Library()


@register.filter
def state_word(value) -> str:
    """The word of ``value`` (``Running``, ``Completed``, ...); an unknown state as it is, "" for None."""
    return state_label(str(value)) if value is not None else ""
