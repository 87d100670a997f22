"""API tokens and the audit of admin changes (services behind the account pages and the API)."""

from __future__ import annotations

# --------------------------------------------------------------------------- API tokens


def tokens_for(user):
    """The user's tokens (newest first), revoked ones included (shown as revoked). Keys are never stored."""
    from accounts.models import APIToken

    return APIToken.objects.filter(user=user)


def create_token(user, name: str, request=None):
    """Issue a token called ``name`` (1-128 chars) for ``user``; returns ``(token, key)``.

    The plaintext ``key`` exists only in this return value: show it once. Raises ValueError for an empty name.
    Audited as ``token.create`` (prefix only).
    """
    from accounts import audit
    from accounts.authentication import issue_token

    name = (name or "").strip()[:128]
    if not name:
        raise ValueError("name is required")
    token, key = issue_token(user, name)
    audit.record(user, "token.create", "api_token", token.pk, request=request, name=name, prefix=token.prefix)
    return token, key


def revoke_token(user, token_id, request=None):
    """Revoke one of ``user``'s tokens (staff may revoke anyone's). Raises ``APIToken.DoesNotExist``."""
    from accounts import audit
    from accounts.models import APIToken

    qs = APIToken.objects.all() if user.is_staff else APIToken.objects.filter(user=user)
    token = qs.get(pk=token_id)
    if not token.revoked:
        token.revoked = True
        token.save(update_fields=["revoked"])
        audit.record(
            user,
            "token.revoke",
            "api_token",
            token.pk,
            request=request,
            name=token.name,
            prefix=token.prefix,
            owner=token.user.username,
        )
    return token


def record_admin_change(log_entry) -> None:
    """Copy one Django admin ``LogEntry`` (add/change/delete in the back office) into the audit log as
    ``admin.add|admin.change|admin.delete`` with the object type, id, its text and the changed field names
    (LogEntry stores field names, never values, so no secret is copied)."""
    from accounts import audit

    actions = {1: "admin.add", 2: "admin.change", 3: "admin.delete"}
    ct = log_entry.content_type
    object_type = f"{ct.app_label}.{ct.model}" if ct else ""
    audit.record(
        log_entry.user,
        actions.get(log_entry.action_flag, "admin.other"),
        object_type,
        log_entry.object_id or "",
        object=log_entry.object_repr[:200],
        change=log_entry.get_change_message()[:500],
    )
