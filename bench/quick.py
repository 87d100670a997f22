"""Short mode shared by every ``bench/`` script: ``--quick`` or ``RLARK_BENCH_QUICK=1``.

A quick run exercises the same code paths as the full one on a small fleet, so CI (tests/console/test_bench_quick.py)
runs every script and a script cannot rot; its figures are not the README's.
"""

from __future__ import annotations

import os
import sys
import time


def quick_requested(argv: list[str] | None = None) -> bool:
    """True when ``--quick`` is in ``argv`` (default ``sys.argv``) or ``RLARK_BENCH_QUICK=1`` is set."""
    argv = sys.argv if argv is None else argv
    return "--quick" in argv or os.environ.get("RLARK_BENCH_QUICK", "") == "1"


def quick_defaults(parser, **small) -> None:
    """Add ``--quick`` to an argparse ``parser`` and, in quick mode, make ``small`` its defaults (flags given on
    the command line still win)."""
    parser.add_argument("--quick", action="store_true", help="short run on a small fleet (also RLARK_BENCH_QUICK=1)")
    if quick_requested():
        parser.set_defaults(**small)


def wait_for(check, timeout: float, what: str, interval: float = 0.5):
    """Poll ``check`` every ``interval`` s until it returns something truthy (returned); ``TimeoutError`` naming
    ``what`` and the last value after ``timeout`` s. Shared by the bench scripts."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = check()
        if last:
            return last
        time.sleep(interval)
    raise TimeoutError(f"timed out after {timeout:.0f} s waiting for {what} (last: {last!r})")
