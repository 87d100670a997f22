"""One pagination parameter set for every API collection (docs/api-standards.md).

``limit`` (rows, 1..``MAX_LIMIT``, default ``DEFAULT_LIMIT``) and ``offset`` (rows skipped, >= 0); ``page_size``
is accepted as another name for ``limit`` (it used to be silently ignored). A value that is not a whole number in
range, or ``limit`` and ``page_size`` given with different values, is rejected with 400
``{"code": "pagination_invalid", "field": ..., "detail": ...}``: never silently replaced. The answer is DRF's
``{"count", "next", "previous", "results"}``.
"""

from __future__ import annotations

from django.utils.translation import gettext as _
from drf_spectacular.utils import OpenApiParameter
from rest_framework import status
from rest_framework.exceptions import APIException
from rest_framework.pagination import LimitOffsetPagination

DEFAULT_LIMIT = 50
MAX_LIMIT = 500


class PaginationInvalid(APIException):
    status_code = status.HTTP_400_BAD_REQUEST
    default_code = "pagination_invalid"

    def __init__(self, field: str, detail: str) -> None:
        super().__init__({"code": "pagination_invalid", "field": field, "detail": detail})


def _whole(request, name: str, low: int, high: int | None) -> int | None:
    raw = request.query_params.get(name)
    if raw is None or raw == "":
        return None
    try:
        value = int(raw)
    except ValueError:
        raise PaginationInvalid(name, _("%(name)s must be a whole number.") % {"name": name}) from None
    if high is not None and not low <= value <= high:
        raise PaginationInvalid(
            name, _("%(name)s must be between %(low)d and %(high)d.") % {"name": name, "low": low, "high": high}
        )
    if value < low:
        raise PaginationInvalid(name, _("%(name)s must be at least %(low)d.") % {"name": name, "low": low})
    return value


class ConsolePagination(LimitOffsetPagination):
    """``limit``/``offset`` with ``page_size`` as an alias of ``limit``; bounded; invalid values are a 400."""

    default_limit = DEFAULT_LIMIT
    max_limit = MAX_LIMIT

    def get_limit(self, request) -> int:
        limit = _whole(request, "limit", 1, MAX_LIMIT)
        page_size = _whole(request, "page_size", 1, MAX_LIMIT)
        if limit is not None and page_size is not None and limit != page_size:
            raise PaginationInvalid(
                "page_size", _("Give limit or page_size (the same parameter), not two different values.")
            )
        return limit or page_size or self.default_limit

    def get_offset(self, request) -> int:
        return _whole(request, "offset", 0, None) or 0

    def get_schema_operation_parameters(self, view):  # noqa: D102
        return [
            {
                "name": p.name,
                "in": "query",
                "required": False,
                "description": p.description,
                "schema": {"type": "integer"},
            }
            for p in PARAMETERS
        ]


PARAMETERS = [
    OpenApiParameter("limit", int, description=f"rows per page, 1..{MAX_LIMIT} (default {DEFAULT_LIMIT})"),
    OpenApiParameter("page_size", int, description="the same as limit (either name; not two different values)"),
    OpenApiParameter("offset", int, description="rows to skip, >= 0 (default 0)"),
]
