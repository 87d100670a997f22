"""``python -m clusters.runtime.local --root DIR [--keep-pods]``: the local supervisor (no Django).

An entry module of its own, so that runpy does not warn that ``clusters.runtime.local.supervisor`` (which the
package imports) was already in ``sys.modules`` before it ran as ``__main__``."""

from clusters.runtime.local.supervisor import main

main()
