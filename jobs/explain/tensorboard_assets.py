"""Root-absolute URLs in TensorBoard's CSS, moved under the job's prefix.

TensorBoard's ``--path_prefix`` covers its HTML links, scripts and data requests, but the Roboto font CSS it
inlines in ``index.html`` (and the projector's page) names its fonts as ``url(/font-roboto/<hash>.woff2)``: root
paths outside ``/jobs/<job>/tensorboard/``, which the console does not serve, so every font answered 404. TensorBoard
itself serves the same files under its prefix, so the proxy rewrites such a ``url(/...)`` into ``url(<prefix>/...)``.
"""

from __future__ import annotations

import re

# text TensorBoard sends with inlined or linked CSS; scripts, JSON and binaries pass untouched
REWRITTEN_TYPES = ("text/html", "text/css")
_ROOT_URL = re.compile(rb"""url\(\s*(['"]?)/(?![/])""")


def rewrite_root_urls(body: bytes, content_type: str, prefix: str) -> bytes:
    """``body`` with every CSS ``url(/path)`` (also quoted) turned into ``url(<prefix>/path)``.

    ``content_type`` is the upstream ``Content-Type`` (only ``text/html`` and ``text/css`` are rewritten; other
    bodies are returned as they are). ``prefix`` is the job's path prefix without a trailing slash
    (``/jobs/<job>/tensorboard``). A URL already under the prefix, a protocol-relative ``url(//host/...)``, a
    relative or a ``data:`` URL stays. Pure and bounded by ``len(body)``: one linear regex pass.
    """
    kind = content_type.split(";", 1)[0].strip().lower()
    if kind not in REWRITTEN_TYPES or b"url(" not in body:
        return body
    inside = prefix.rstrip("/").encode() + b"/"

    def move(match: re.Match[bytes]) -> bytes:
        start = match.end() - 1  # the path's leading "/"
        if body.startswith(inside, start):
            return match.group(0)
        return b"url(" + match.group(1) + inside

    return _ROOT_URL.sub(move, body)
