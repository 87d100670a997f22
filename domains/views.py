"""Network domain pages for administrators (seed 04 第三步; upstream-rlark 12.1 UI)."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.admin.views.decorators import staff_member_required
from django.core.exceptions import ValidationError
from django.db.models import Count
from django.shortcuts import get_object_or_404, redirect, render
from django.utils.translation import gettext as _
from django.views.decorators.http import require_POST

from domains import services
from domains.models import Domain


@staff_member_required
def domain_list(request):
    """GET: domains with allocation counts and the create form. POST (name, cidr): create one."""
    form = {"name": "", "cidr": "10.244.0.0/16"}
    error = None
    status = 200
    if request.method == "POST":
        form = {"name": request.POST.get("name", "").strip(), "cidr": request.POST.get("cidr", "").strip()}
        try:
            if Domain.objects.filter(name=form["name"]).exists():
                raise ValidationError(_("A network domain with this name already exists."))
            domain = services.create_domain(form["name"], form["cidr"], request.user, request)
        except services.CIDRError as exc:
            error, status = exc.message, 400
        except ValidationError as exc:
            error, status = " ".join(exc.messages), 400
        else:
            messages.success(request, _("Network domain “%(name)s” created.") % {"name": domain.name})
            return redirect("domains:list")
    domains = [
        {"domain": d, "allocated": d.n_alloc, "capacity": services.capacity(d.cidr)}
        for d in Domain.objects.annotate(n_alloc=Count("allocations"))
    ]
    context = {"domains": domains, "form": form, "error": error}
    return render(request, "domains/list.html", context, status=status)


@staff_member_required
def domain_detail(request, name: str):
    """The domain's IP allocations (IP / job / task / Pod), searchable with ``?q=``."""
    domain = get_object_or_404(Domain, name=name)
    query = request.GET.get("q", "")
    allocations = services.search_allocations(domain, query)
    context = {
        "domain": domain,
        "allocations": allocations,
        "q": query,
        "capacity": services.capacity(domain.cidr),
        "in_use_by": services.active_jobs_using(domain),
    }
    return render(request, "domains/detail.html", context)


@staff_member_required
@require_POST
def domain_delete(request, name: str):
    """Delete a domain unless an active job uses it."""
    domain = get_object_or_404(Domain, name=name)
    try:
        services.delete_domain(domain, request.user, request)
    except services.DomainInUse as exc:
        messages.error(request, str(exc))
        return redirect("domains:detail", name=name)
    messages.success(request, _("Network domain “%(name)s” deleted.") % {"name": name})
    return redirect("domains:list")
