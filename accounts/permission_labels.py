"""Permission names in the back office's language (the fresh-clone trial: group and user permission pickers read
"账号与审计 | API 令牌 | Can add API token", half English).

Django stores a model's default permission names in English at migration time (``Can add API token``), so they
never follow the language. :func:`label` builds the picker's text from what is translated instead: the app's and
the model's verbose names and the action of the four default codenames (``add_``, ``change_``, ``delete_``,
``view_``). A custom permission reads its entry of :data:`CUSTOM`, else its own (stored) name.
"""

from __future__ import annotations

from django.utils.translation import gettext as _
from django.utils.translation import gettext_noop

# Custom permissions (``Meta.permissions``; stored in English) -> their msgid, so the picker reads them translated.
# ``approve_robot_job``: the safety approver of robot jobs (jobs.models_safety, jobs.control.safety).
CUSTOM: dict[str, str] = {"approve_robot_job": gettext_noop("Can approve real-robot jobs (safety approver)")}


def _action(codename: str, model: str) -> str | None:
    actions = {
        "add": _("Can add %(model)s"),
        "change": _("Can change %(model)s"),
        "delete": _("Can delete %(model)s"),
        "view": _("Can view %(model)s"),
    }
    verb, _sep, rest = codename.partition("_")
    return actions[verb] % {"model": model} if verb in actions and rest else None


def label(permission) -> str:
    """``<app> | <model> | <action>`` in the active language (Django's own layout of the picker's options)."""
    ct = permission.content_type
    model_class = ct.model_class()
    if model_class is None:  # a stale content type: what is stored
        return str(permission)
    meta = model_class._meta
    app = meta.app_config.verbose_name
    model = str(meta.verbose_name)
    expected = f"{permission.codename.partition('_')[0]}_{meta.model_name}"
    text = _action(permission.codename, model) if permission.codename == expected else None
    if text is None and permission.codename in CUSTOM:
        text = _(CUSTOM[permission.codename])
    return f"{app} | {model} | {text or permission.name}"


def localize_field(field) -> None:
    """Make a permissions ``ModelMultipleChoiceField`` show :func:`label` (and read content types in one query)."""
    if field is None:
        return
    field.queryset = field.queryset.select_related("content_type")
    field.label_from_instance = label
