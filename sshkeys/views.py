"""SSH Key Management page (seed 04 第二步): add, list with fingerprint, delete with confirmation."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404
from django.shortcuts import redirect, render
from django.utils.translation import gettext as _
from django.views.decorators.http import require_POST

from sshkeys import services
from sshkeys.models import SSHPublicKey


@login_required
def key_list(request):
    """GET: the page. POST (name, key): add a key; errors re-render the form (400, or 409 for a duplicate)."""
    form = {"name": "", "key": ""}
    error = None
    cleared = False
    status = 200
    if request.method == "POST":
        form = {"name": request.POST.get("name", ""), "key": request.POST.get("key", "")}
        try:
            key = services.add_key(request.user, form["name"], form["key"], request)
        except services.SSHKeyError as exc:
            error = exc
            status = 409 if isinstance(exc, services.DuplicateKeyError) else 400
            if exc.code == "ssh_key_private":
                form["key"] = ""  # a private key is never echoed back into the page
                cleared = True
        else:
            messages.success(request, _("Key “%(name)s” added: %(fp)s") % {"name": key.name, "fp": key.fingerprint})
            return redirect("sshkeys:list")
    keys = list(services.visible_keys(request.user))
    used_by = services.jobs_using_keys(request.user, keys)
    for key in keys:
        key.used_by = used_by.get(key.pk, [])
    context = {
        "keys": keys,
        "form": form,
        "error": error,
        "cleared": cleared,
        "show_owner": request.user.is_staff,
    }
    return render(request, "sshkeys/keys.html", context, status=status)


@login_required
@require_POST
def key_delete(request, pk: int):
    """Delete one of the caller's keys (staff: any key); 404 for other users' keys."""
    try:
        key = services.get_key_for(request.user, pk)
    except SSHPublicKey.DoesNotExist:
        raise Http404("key not found")
    name = key.name
    services.delete_key(request.user, key, request)
    messages.success(request, _("Key “%(name)s” deleted.") % {"name": name})
    return redirect("sshkeys:list")
