"""The Notifications pages: the user's channels and default rules (account area, ``/account/notifications/``) and
a job's rules with their delivery status and last error (the job's Notifications tab,
``/jobs/<name>/notifications/``), and the edit form of one channel or rule. Thin: every rule is in
``notifications.services`` and ``notifications.edit``."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils.translation import gettext as _
from django.views.decorators.http import require_POST

from jobs import policy
from notifications import edit as editing
from notifications import services, testrequest
from notifications.models import Event, Kind, Rule

MAX_FIELD = 4096  # characters of any posted field read


def _form(request: HttpRequest) -> dict:
    data = {k: str(request.POST.get(k, ""))[:MAX_FIELD] for k in request.POST if k != "events"}
    data["events"] = [str(e)[:32] for e in request.POST.getlist("events")[:20]]
    return data


def _context(request: HttpRequest, **extra) -> dict:
    return {
        "channels": list(services.channels_of(request.user)),
        "kinds": Kind.choices,
        "events": Event.choices,
        "max_pattern": services.runcheck_settings.MAX_PATTERN_LEN,
        "form": {},
        "error": None,
        **extra,
    }


@login_required
def page(request: HttpRequest) -> HttpResponse:
    """GET: channels and default rules. POST ``form=channel`` or ``form=rule``: add one; errors re-render (400)."""
    status = 200
    error = None
    form: dict = {}
    if request.method == "POST":
        form = _form(request)
        try:
            if form.get("form") == "channel":
                channel = services.create_channel(request.user, form, request)
                messages.success(request, _("Channel “%(name)s” added.") % {"name": channel.name})
            else:
                services.create_rule(request.user, form, request=request)
                messages.success(request, _("Rule added."))
        except services.NotifyError as exc:
            error, status = exc, 400
        else:
            return redirect("notifications:page")
    rules = list(services.rules_of(request.user))
    context = _context(request, rules=rules, form=form, error=error)
    return render(request, "notifications/page.html", context, status=status)


@login_required
@require_POST
def delete(request: HttpRequest, what: str, pk: int) -> HttpResponse:
    """Delete one of the caller's channels or rules (404 for anyone else's); back to where the form was."""
    if what == "channel":
        channel = services.channels_of(request.user).filter(pk=pk).first()
        if channel is None:
            raise Http404
        services.delete_channel(request.user, channel, request)
        messages.success(request, _("Channel “%(name)s” deleted.") % {"name": channel.name})
        return redirect("notifications:page")
    rule = Rule.objects.filter(owner=request.user, pk=pk).select_related("job").first()
    if rule is None:
        raise Http404
    job = rule.job
    services.delete_rule(request.user, rule, request)
    messages.success(request, _("Rule deleted."))
    if job is not None:
        return redirect("notifications-job", name=job.name)
    return redirect("notifications:page")


@login_required
def job_page(request: HttpRequest, name: str) -> HttpResponse:
    """The job's Notifications tab: the rules that apply to it (its own and its owner's defaults) with their
    delivery status and last error; its owner adds a rule for this job here."""
    job = policy.get_job_for(request.user, name)
    mine = job.owner_id == request.user.pk
    status, error, form = 200, None, {}
    if request.method == "POST":
        if not (mine and policy.can_change_job(request.user, job)):
            raise PermissionDenied
        form = _form(request)
        try:
            services.create_rule(request.user, form, job=job, request=request)
        except services.NotifyError as exc:
            error, status = exc, 400
        else:
            messages.success(request, _("Rule added."))
            return redirect("notifications-job", name=job.name)
    rules = list(services.rules_of(request.user, job))
    deliveries = list(job.notify_deliveries.select_related("rule__channel").order_by("-event_at")[:20])
    context = _context(
        request, job=job, tab="notifications", rules=rules, deliveries=deliveries, mine=mine, form=form, error=error
    )
    return render(request, "notifications/job.html", context, status=status)


@login_required
def edit(request: HttpRequest, what: str, pk: int) -> HttpResponse:
    """GET: the edit form of one of the caller's channels (``what`` "channel") or rules (404 for anyone else's);
    the stored URL and secret are not in the form (blank keeps them). POST: save, back to the page the rule is
    listed on; an error re-renders the form (400) with nothing saved."""
    if what == "channel":
        obj = services.channels_of(request.user).filter(pk=pk).first()
    elif what == "rule":
        obj = Rule.objects.filter(owner=request.user, pk=pk).select_related("channel", "job").first()
    else:
        obj = None
    if obj is None:
        raise Http404
    status, error = 200, None
    if what == "channel":
        form = {"name": obj.name, "email": obj.email, "language": obj.language}
    else:
        form = {k: getattr(obj, k) for k in ("events", "pending_minutes", "log_pattern", "enabled")}
        form["channel"] = obj.channel_id
    if request.method == "POST":
        form = _form(request)
        try:
            if what == "channel":
                obj = editing.update_channel(request.user, obj, form, request)
                messages.success(request, _("Channel “%(name)s” saved.") % {"name": obj.name})
            else:
                form["enabled"] = "enabled" in request.POST
                obj = editing.update_rule(request.user, obj, form, request)
                messages.success(request, _("Rule saved."))
        except services.NotifyError as exc:
            error, status = exc, 400
        else:
            if what == "rule" and obj.job is not None:
                return redirect("notifications-job", name=obj.job.name)
            return redirect("notifications:page")
    masked = editing.masked_url(obj.url) if what == "channel" else ""
    context = _context(request, what=what, obj=obj, form=form, error=error, masked=masked)
    return render(request, "notifications/edit.html", context, status=status)


@login_required
@require_POST
def test(request: HttpRequest, pk: int) -> HttpResponse:
    """Send a test message on one of the caller's channels (404 for anyone else's); its status is shown in the
    channel list."""
    channel = services.channels_of(request.user).filter(pk=pk).first()
    if channel is None:
        raise Http404
    try:
        testrequest.start(request.user, channel, request)
    except services.NotifyError as exc:
        messages.error(request, exc.message)
    else:
        messages.success(request, _("Test message of “%(name)s” sent off.") % {"name": channel.name})
    return redirect("notifications:page")
