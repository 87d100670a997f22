"""API error bodies in the request's language (never a Chinese prefix with an English detail).

- :func:`runtime_failure` -> ``{"code", "detail", "cause"}`` for a failed runtime call: ``code`` is the
  :class:`~clusters.runtime.base.RuntimeFailure` reason (``unreachable``, ``forbidden`` ...; read by attribute, so
  this module imports no runtime), ``detail`` a sentence
  in the active language naming the action and the reason, ``cause`` the runtime's own message (the Kubernetes API's
  or the local supervisor's words, credential-free, not translated: it quotes the cluster).
- :func:`not_found` -> ``{"code": "not_found", "detail"}`` with Django REST framework's translated "Not found.".
- :func:`required` -> DRF's translated "This field is required." for one field.
"""

from __future__ import annotations

from django.utils.translation import gettext as _


def failure_reason(exc: Exception) -> str:
    """A short phrase in the active language for ``exc.reason`` (a ``RuntimeFailure``'s; any other exception reads as
    an error the cluster reported)."""
    reasons = {
        "unreachable": _("the cluster cannot be reached"),
        "unauthorized": _("the cluster rejected the console's credentials"),
        "forbidden": _("the console's RBAC does not allow it"),
        "not_found": _("the object does not exist in the cluster"),
        "conflict": _("the cluster reported a conflicting change"),
        "invalid": _("the cluster rejected the request"),
    }
    return reasons.get(getattr(exc, "reason", ""), _("the cluster reported an error"))


def runtime_failure(exc: Exception, action: str) -> dict:
    """``action`` is a translated verb phrase (``_("Delete")``)."""
    detail = _("%(action)s failed: %(reason)s.") % {"action": action, "reason": failure_reason(exc)}
    return {"code": getattr(exc, "reason", "internal"), "detail": detail, "cause": str(exc)[:500]}


def not_found() -> dict:
    return {"code": "not_found", "detail": _("Not found.")}


def required(field: str) -> dict:
    return {"code": "invalid", "detail": {field: [_("This field is required.")]}}
