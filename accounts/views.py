"""Login (rate limited) and the API tokens page."""

from __future__ import annotations

from django.contrib.auth import views as auth_views
from django.contrib.auth.decorators import login_required
from django.shortcuts import render
from django.utils.translation import gettext as _

from accounts import audit, ratelimit
from rlark_console.clientaddr import request_address


class RateLimitedLoginView(auth_views.LoginView):
    """Django's login view with per-address/username throttling and audit of logins."""

    template_name = "registration/login.html"
    redirect_authenticated_user = True

    def post(self, request, *args, **kwargs):  # noqa: D102
        username = request.POST.get("username", "")
        addr = request_address(request)
        with ratelimit.pair_turn(addr, username) as turn:  # one check at a time per pair: the counter holds
            if not turn:
                return self._throttled(username)
            return self._post(request, username, addr, *args, **kwargs)

    def _throttled(self, username: str):
        """429 with an unbound form: the posted password is never checked while locked, so the page cannot tell a
        right password from a wrong one (nor does it show "enter a correct username and password" beside this)."""
        form = self.get_form_class()(self.request, initial={"username": username[:150]})
        form.cleaned_data = {}  # unbound: nothing was validated, only this error is shown
        form.add_error(None, _("Too many failed logins. Try again in a few minutes."))
        return self.render_to_response(self.get_context_data(form=form), status=429)

    def _post(self, request, username: str, addr: str, *args, **kwargs):
        if ratelimit.is_locked(addr, username):
            return self._throttled(username)
        return super().post(request, *args, **kwargs)

    def form_valid(self, form):  # noqa: D102
        ratelimit.reset(request_address(self.request), form.get_user().get_username())
        response = super().form_valid(form)
        audit.record(form.get_user(), "login", "user", form.get_user().pk, request=self.request)
        return response

    def form_invalid(self, form):  # noqa: D102
        ratelimit.record_failure(request_address(self.request), self.request.POST.get("username", ""))
        return super().form_invalid(form)


@login_required
def tokens(request):
    """API tokens page: list by prefix, create (the key is shown once on the response page), revoke."""
    from django.contrib import messages

    from accounts import services
    from accounts.models import APIToken

    new_key = None
    status = 200
    if request.method == "POST":
        if request.POST.get("revoke"):
            try:
                token = services.revoke_token(request.user, request.POST["revoke"], request)
            except (APIToken.DoesNotExist, ValueError):
                status = 404
            else:
                messages.success(request, _("Token “%(name)s” revoked.") % {"name": token.name})
        else:
            try:
                token, new_key = services.create_token(request.user, request.POST.get("name", ""), request)
            except ValueError:
                messages.error(request, _("Enter a name for the token."))
                status = 400
    context = {"tokens": services.tokens_for(request.user), "new_key": new_key}
    response = render(request, "accounts/tokens.html", context, status=status)
    if new_key:
        response["Cache-Control"] = "no-store"
    return response


@login_required
def tracking(request):
    """Experiment-tracking credentials page: list (name, service, host; never the key), add, delete.

    A bad form answers 400 with the reason; deleting a credential that is not the user's answers 404."""
    from django.contrib import messages

    from accounts import tracking as services
    from accounts.models import TrackingCredential

    status = 200
    form = {}
    if request.method == "POST":
        if request.POST.get("delete"):
            try:
                cred = services.delete(request.user, request.POST["delete"], request)
            except (TrackingCredential.DoesNotExist, ValueError):
                status = 404
            else:
                messages.success(request, _("Credential “%(name)s” deleted.") % {"name": cred.name})
        else:
            form = {k: request.POST.get(k, "")[:512] for k in ("name", "kind", "host", "entity")}
            try:
                cred = services.create(
                    request.user,
                    form["name"],
                    form["kind"],
                    request.POST.get("api_key", "")[:1024],
                    form["host"],
                    request,
                    entity=form["entity"],
                )
            except services.CredentialError as exc:
                messages.error(request, str(exc))
                status = 400
            else:
                form = {}
                messages.success(request, _("Credential “%(name)s” saved.") % {"name": cred.name})
    context = {
        "credentials": services.credentials_for(request.user),
        "kinds": TrackingCredential.Kind.choices,
        "form": form,
    }
    return render(request, "accounts/tracking.html", context, status=status)
