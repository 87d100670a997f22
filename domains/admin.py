"""Back office for network domains (seed 04 第三步 "管理后台 → 网络域"), with the IP allocations inline."""

from __future__ import annotations

from django import forms
from django.contrib import admin, messages
from django.db.models import Count
from django.shortcuts import redirect
from django.urls import reverse
from django.utils.translation import gettext_lazy as _
from django.utils.translation import ngettext

from domains import dataplane, services
from domains.models import Domain, IPAllocation


class DomainForm(forms.ModelForm):
    """Validates the CIDR with :func:`domains.services.validate_cidr` (same rules as the API)."""

    class Meta:
        model = Domain
        fields = ["name", "cidr"]
        help_texts = {
            "cidr": _(
                "A private IPv4 range (10.0.0.0/8, 172.16.0.0/12 or 192.168.0.0/16), prefix /8 to /29, that overlaps "
                "no other network domain and no cluster's Pod or Service CIDR, e.g. 10.100.0.0/16. Addresses ending "
                "in .0 or .255 are never assigned."
            )
        }

    def clean_cidr(self):
        cidr = self.cleaned_data.get("cidr", "").strip()
        try:
            services.validate_cidr(cidr, exclude=self.instance if self.instance.pk else None)
        except services.CIDRError as exc:
            raise forms.ValidationError(exc.message, code=exc.code)
        return cidr


class IPAllocationInline(admin.TabularInline):
    """Each member: IP, job, Task, cluster, Pod and the state of its network agent's connection."""

    model = IPAllocation
    fields = ["ip", "job", "task", "cluster", "pod", "connection", "created_at"]
    readonly_fields = fields
    extra = 0
    can_delete = False
    verbose_name_plural = _("IP allocations")
    STATE_LABELS = {
        "connected": _("connected"),
        "connecting": _("connecting"),
        "stopped": _("stopped"),
        "unknown": _("unknown: the local runtime supervisor does not answer"),
    }

    def has_add_permission(self, request, obj=None):
        return False

    def get_formset(self, request, obj=None, **kwargs):
        self._states = dataplane.connection_states()  # one supervisor call per isolated cluster per page
        return super().get_formset(request, obj, **kwargs)

    @admin.display(description=_("cluster"))
    def cluster(self, obj):
        return obj.pod_key.split("/", 1)[0]

    @admin.display(description=_("Pod"))
    def pod(self, obj):
        return obj.pod_key.rsplit("/", 1)[-1]

    @admin.display(description=_("connection"))
    def connection(self, obj):
        cluster, _ns, pod = (obj.pod_key.split("/", 2) + ["", ""])[:3]
        states = getattr(self, "_states", {})
        state = states.get(f"{cluster}/{pod}") or states.get(f"{cluster}/*")
        if state is None:
            return _("not on an isolated local cluster")
        label = self.STATE_LABELS.get(state.get("state"), state.get("state") or "?")
        if state.get("error") and state.get("state") == "connecting":
            return f"{label} ({state['error']})"
        return label


@admin.register(Domain)
class DomainAdmin(admin.ModelAdmin):
    form = DomainForm
    list_display = ["name", "cidr", "allocation_count", "created_at"]
    search_fields = ["name", "cidr", "allocations__job", "allocations__pod_key", "allocations__ip"]
    inlines = [IPAllocationInline]

    def get_queryset(self, request):
        return super().get_queryset(request).annotate(n_alloc=Count("allocations"))

    @admin.display(description=_("IP allocations"), ordering="n_alloc")
    def allocation_count(self, obj):
        n = obj.n_alloc
        return ngettext("%(n)d allocation", "%(n)d allocations", n) % {"n": n}

    def get_readonly_fields(self, request, obj=None):
        # The CIDR of a domain that already handed out addresses cannot change under running Workers.
        if obj is not None and obj.allocations.exists():
            return ["cidr", "created_at"]
        return ["created_at"] if obj is not None else []

    def get_actions(self, request):
        actions = super().get_actions(request)
        actions.pop("delete_selected", None)  # deletion goes through the in-use check below
        return actions

    def delete_view(self, request, object_id, extra_context=None):
        obj = self.get_object(request, object_id)
        if obj is not None:
            jobs = services.active_jobs_using(obj)
            if jobs:
                self.message_user(request, str(services.DomainInUse(obj, jobs)), messages.ERROR)
                return redirect(reverse("admin:domains_domain_change", args=[obj.pk]))
        return super().delete_view(request, object_id, extra_context)

    def delete_model(self, request, obj):
        services.delete_domain(obj, request.user, request)
