"""Back office for nodes: capacity list, system-node switch, batch metadata edit, cordon.

The admin class only wires forms to services: system nodes ``clusters.system_nodes``, metadata
``clusters.services.node_metadata``, capacity figures ``clusters.services.node_capacity``, cordon
``clusters.services.registration.set_cordon``.
"""

from __future__ import annotations

from django import forms
from django.contrib import admin, messages
from django.contrib.admin.helpers import ACTION_CHECKBOX_NAME
from django.db.models import Q
from django.template.response import TemplateResponse
from django.utils.html import format_html, format_html_join
from django.utils.safestring import mark_safe
from django.utils.translation import gettext_lazy as _
from django.utils.translation import ngettext

from clusters.models import Node
from clusters.node_health import problems
from clusters.runtime.base import RuntimeFailure
from clusters.services.inventory import CATEGORIES, category_label
from clusters.services.node_capacity import jobs_on_node, with_capacity
from clusters.services.node_metadata import FIELDS, MetadataError, set_field
from clusters.services.nodes import gpu_key, total_free
from clusters.services.registration import set_cordon


class SystemNodeFilter(admin.SimpleListFilter):
    """Hidden by default; "show system nodes" lists control-plane nodes too, "only" lists just them."""

    title = _("system nodes")
    parameter_name = "system"

    def lookups(self, request, model_admin):
        return [("show", _("Show system nodes")), ("only", _("Only system nodes"))]

    def choices(self, changelist):
        yield {
            "selected": self.value() is None,
            "query_string": changelist.get_query_string(remove=[self.parameter_name]),
            "display": _("Hide system nodes"),
        }
        for value, title in self.lookup_choices:
            yield {
                "selected": self.value() == value,
                "query_string": changelist.get_query_string({self.parameter_name: value}),
                "display": title,
            }

    def queryset(self, request, queryset):
        if self.value() == "show":
            return queryset
        if self.value() == "only":
            return queryset.filter(system=True)
        return queryset.filter(system=False)


class LabelFilter(admin.ListFilter):
    """``?label=key`` or ``?label=key=value`` on the effective labels (a text box in the filter panel)."""

    title = _("label")
    parameter_name = "label"
    template = "admin/clusters/node/label_filter.html"

    def __init__(self, request, params, model, model_admin):
        super().__init__(request, params, model, model_admin)
        value = params.pop(self.parameter_name, "")
        self.value = (value[-1] if isinstance(value, list) else value or "").strip()[:400]

    def has_output(self):
        return True

    def choices(self, changelist):
        keep = [(k, v) for k, v in changelist.params.items() if k not in (self.parameter_name, "p")]
        return [{"value": self.value, "params": keep}]

    def expected_parameters(self):
        return [self.parameter_name]

    def queryset(self, request, queryset):
        if not self.value:
            return queryset
        key, eq, value = self.value.partition("=")
        key = key.strip()
        if not eq:
            return queryset.filter(labels__has_key=key)
        return queryset.filter(Q(labels__has_key=key) & Q(**{"labels__" + key.replace("__", "_"): value.strip()}))


class ReadinessFilter(admin.SimpleListFilter):
    title = _("readiness")
    parameter_name = "ready"

    def lookups(self, request, model_admin):
        return [
            ("schedulable", _("Ready and schedulable")),
            ("ready", _("Ready")),
            ("not_ready", _("Not ready")),
            ("cordoned", _("Cordoned")),
        ]

    def queryset(self, request, queryset):
        return {
            "schedulable": lambda: queryset.filter(online=True, unschedulable=False),
            "ready": lambda: queryset.filter(online=True),
            "not_ready": lambda: queryset.filter(online=False),
            "cordoned": lambda: queryset.filter(unschedulable=True),
        }.get(self.value(), lambda: queryset)()


class CategoryFilter(admin.SimpleListFilter):
    """The node categories by their localized names ("云算力", "端算力", "机器人", "其他"), not the stored codes."""

    title = _("category")
    parameter_name = "category"

    def lookups(self, request, model_admin):
        return [(c, category_label(c)) for c in (*CATEGORIES, "unknown")]

    def queryset(self, request, queryset):
        if self.value() == "unknown":
            return queryset.exclude(category__in=CATEGORIES)
        if self.value() in CATEGORIES:
            return queryset.filter(category=self.value())
        return queryset


class MetadataForm(forms.Form):
    """One field set or removed on every selected node."""

    FIELD_CHOICES = [
        ("category", _("Category (rlark.io/node-category)")),
        ("gpu_model", _("GPU model")),
        ("device_model", _("Device model")),
        ("city", _("Location: city")),
        ("site", _("Location: site")),
        ("label", _("Console label")),
        ("annotation", _("Console annotation")),
    ]
    field = forms.ChoiceField(label=_("Field"), choices=FIELD_CHOICES)
    key = forms.CharField(
        label=_("Key"), required=False, max_length=317, help_text=_("Only for a console label or annotation.")
    )
    operation = forms.ChoiceField(
        label=_("Operation"), choices=[("set", _("Set to the value")), ("remove", _("Remove"))], initial="set"
    )
    value = forms.CharField(label=_("Value"), required=False, max_length=4096)

    def clean(self):
        data = super().clean()
        if data.get("operation") == "set" and not (data.get("value") or "").strip():
            raise forms.ValidationError(_("Enter a value, or choose Remove."))
        if data.get("field") in ("label", "annotation") and not (data.get("key") or "").strip():
            raise forms.ValidationError(_("A console label or annotation needs a key."))
        return data


assert {c for c, _label in MetadataForm.FIELD_CHOICES} == set(FIELDS)


@admin.register(Node)
class NodeAdmin(admin.ModelAdmin):
    list_display = (
        "name",
        "cluster",
        "category_label",
        "gpu_model",
        "gpus",
        "free_gpus",
        "jobs",
        "readiness",
        "last_seen",
    )
    list_filter = (SystemNodeFilter, "cluster", LabelFilter, "gpu_model", ReadinessFilter, CategoryFilter)
    search_fields = ("name",)
    list_select_related = ("cluster",)
    list_per_page = 100
    show_full_result_count = False
    ordering = ("cluster__name", "name")
    readonly_fields = (
        "cluster",
        "name",
        "system",
        "online",
        "unschedulable",
        "health",
        "warning_events",
        "jobs_here",
        "effective_labels",
        "effective_annotations",
        "discovered_labels",
        "discovered_annotations",
        "console_labels",
        "console_annotations",
        "capacity",
        "allocatable",
        "used",
        "last_seen",
    )
    fields = readonly_fields
    actions = ["set_metadata", "cordon", "uncordon"]

    def get_queryset(self, request):
        return with_capacity(super().get_queryset(request))

    def has_add_permission(self, request):
        return False  # nodes come from the cluster (sync); a local cluster's from its registration

    @admin.display(description=_("category"), ordering="category")
    def category_label(self, obj):
        return category_label(obj.category)

    @admin.display(description=_("GPUs used / total"), ordering="gpu_used")
    def gpus(self, obj):
        key = gpu_key(obj.capacity, obj.allocatable, obj.used)
        total, _free = total_free(obj, key)
        if not total:
            return "—"
        return f"{_num(min(total, float((obj.used or {}).get(key) or 0)))} / {_num(total)}"

    @admin.display(description=_("GPUs free"), ordering="gpu_free")
    def free_gpus(self, obj):
        total, free = total_free(obj, gpu_key(obj.capacity, obj.allocatable, obj.used))
        return _num(free) if total else "—"

    @admin.display(description=_("jobs"), ordering="job_count")
    def jobs(self, obj):
        return getattr(obj, "job_count", 0) or 0

    @admin.display(description=_("readiness"), ordering="online")
    def readiness(self, obj):
        ready = _("Ready") if obj.online else _("Not ready")
        css = "status-online" if obj.online else "status-offline"
        out = format_html('<span class="badge {}">{}</span>', css, ready)
        if obj.unschedulable:
            out += format_html(' <span class="badge status-degraded">{}</span>', _("Cordoned"))
        if obj.system:
            out += format_html(' <span class="badge">{}</span>', _("system"))
        for problem in problems(obj.conditions):
            out += format_html(' <span class="badge status-offline">{}</span>', problem)
        return out

    @admin.display(description=_("conditions"))
    def health(self, obj):
        rows = ((c["type"], c["status"], c.get("reason", ""), c.get("message", "")) for c in obj.conditions or [])
        return format_html_join(mark_safe("<br>"), "<code>{}={}</code> {} {}", rows) or "—"

    @admin.display(description=_("recent Warning events (1 h)"))
    def warning_events(self, obj):
        rows = ((e["last_time"][:19], e["reason"], e["count"], e["message"]) for e in obj.events or [])
        return format_html_join(mark_safe("<br>"), "{} <b>{}</b> ×{} {}", rows) or "—"

    @admin.display(description=_("jobs on this node"))
    def jobs_here(self, obj):
        return ", ".join(jobs_on_node(obj)) or "—"

    @admin.display(description=_("labels (effective)"))
    def effective_labels(self, obj):
        return _pairs(obj.labels)

    @admin.display(description=_("annotations (effective)"))
    def effective_annotations(self, obj):
        return _pairs(obj.annotations)

    @admin.action(description=_("Set or remove a metadata field"))
    def set_metadata(self, request, queryset):
        if "apply" in request.POST:
            form = MetadataForm(request.POST)
            if form.is_valid():
                data = form.cleaned_data
                value = data["value"] if data["operation"] == "set" else None
                try:
                    result = set_field(
                        queryset.select_related("cluster"),
                        data["field"],
                        value,
                        key=data["key"],
                        actor=request.user,
                        request=request,
                    )
                except MetadataError as exc:
                    form.add_error(None, str(exc))
                else:
                    self.message_user(
                        request,
                        ngettext(
                            "Metadata changed on %(n)d node (%(same)d already had it).",
                            "Metadata changed on %(n)d nodes (%(same)d already had it).",
                            result.changed,
                        )
                        % {"n": result.changed, "same": result.unchanged},
                        messages.SUCCESS,
                    )
                    for warning in result.warnings:
                        self.message_user(request, _("Not written to the cluster: %s") % warning, messages.WARNING)
                    return None
        else:
            form = MetadataForm()
        context = {
            **self.admin_site.each_context(request),
            "title": _("Set or remove a metadata field"),
            "form": form,
            "nodes": queryset[:50],
            "count": queryset.count(),
            "opts": self.model._meta,
            "action_checkbox_name": ACTION_CHECKBOX_NAME,
            "selected": request.POST.getlist(ACTION_CHECKBOX_NAME),
            "select_across": request.POST.get("select_across", "0"),
            "query_string": request.META.get("QUERY_STRING", ""),
        }
        return TemplateResponse(request, "admin/clusters/node/set_metadata.html", context)

    def _cordon(self, request, queryset, value: bool):
        done = 0
        for node in queryset.select_related("cluster"):
            try:
                set_cordon(node, value, actor=request.user, request=request)
                done += 1
            except RuntimeFailure as exc:
                self.message_user(request, f"{node.cluster.name}/{node.name}: {exc}", messages.ERROR)
        if done:
            msg = (
                ngettext("Cordoned %(n)d node.", "Cordoned %(n)d nodes.", done)
                if value
                else ngettext("Uncordoned %(n)d node.", "Uncordoned %(n)d nodes.", done)
            )
            self.message_user(request, msg % {"n": done}, messages.SUCCESS)

    @admin.action(description=_("Cordon (no new Workers; running ones keep running)"))
    def cordon(self, request, queryset):
        self._cordon(request, queryset, True)

    @admin.action(description=_("Uncordon (resume scheduling)"))
    def uncordon(self, request, queryset):
        self._cordon(request, queryset, False)


def _num(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else f"{value:.2f}"


def _pairs(mapping) -> str:
    items = sorted((mapping or {}).items())
    return format_html_join(" ", "<code>{}={}</code>", ((k, str(v)[:120]) for k, v in items)) or "—"
