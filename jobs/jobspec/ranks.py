"""RLinf rank expressions (``parse_rank_config``), reproduced exactly from rlinf.md section 5.

Used for ``node_groups[].node_ranks``, ``env_configs[].node_ranks`` and placement parts.

- The input is converted with ``str()`` first (YAML int ``0`` -> ``"0"``); a YAML list is rejected with
  ``ValueError('Invalid rank format ... expected format: "a,b,c-d" or "all"')``.
- ``all`` in any case -> every available rank.
- Otherwise split on ``,``; pieces stripped, empty pieces skipped; each piece split on ``-`` into 1 or 2 ints
  (``int()`` tolerates spaces); result de-duplicated and sorted.
- Only the ends of each range are checked against ``[min(available), max(available)]`` (AssertionError).
- ``"2-1"`` -> AssertionError (start > end); ``"-1"`` -> ValueError; ``""`` -> ``[]``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

RankErrors = (ValueError, AssertionError)
# A range ``a-b`` is expanded into b-a+1 ints: refuse spans beyond this before allocating. With
# ``available`` given, the bound check (<= num_nodes <= 10,000) already comes first.
MAX_RANK_SPAN = 1 << 20


def parse_rank_config(value, available: Sequence[int] | Iterable[int] | None = None) -> list[int]:
    """Parse a rank expression. ``available``: the ranks ``all`` expands to and the bounds ends are checked
    against (e.g. ``range(num_nodes)``); ``None`` disables the bound check and ``all``.

    Raises ``ValueError`` (bad format, list input) or ``AssertionError`` (start > end, out of range), as RLinf.
    """
    if isinstance(value, list | tuple | set | dict):
        raise ValueError(
            f'Invalid rank format {value!r}: expected format: "a,b,c-d" or "all" '
            '(write "0,1" or "0-1" instead of a YAML list)'
        )
    avail = sorted(set(available)) if available is not None else None
    text = str(value)
    if text.strip().lower() == "all":
        if avail is None:
            raise ValueError('"all" needs the list of available ranks')
        return list(avail)
    ranks: set[int] = set()
    for piece in text.split(","):
        piece = piece.strip()
        if not piece:
            continue
        parts = piece.split("-")
        if len(parts) == 1:
            start = end = int(parts[0])
        elif len(parts) == 2:
            start, end = int(parts[0]), int(parts[1])
        else:
            raise ValueError(f'Invalid rank format {piece!r}: expected format: "a,b,c-d" or "all"')
        assert start <= end, f"Invalid rank range {piece!r}: start {start} > end {end}"
        if avail:
            lo, hi = avail[0], avail[-1]
            assert lo <= start <= hi and lo <= end <= hi, (
                f"Rank range {piece!r} is out of the available range [{lo}, {hi}]"
            )
        if end - start >= MAX_RANK_SPAN or len(ranks) + (end - start) >= MAX_RANK_SPAN:
            raise ValueError(f"Rank range {piece!r} spans more than {MAX_RANK_SPAN} ranks")
        ranks.update(range(start, end + 1))
    return sorted(ranks)


def max_rank(value) -> int | None:
    """Highest rank of an expression without expanding it (``"0-3,7"`` -> 7, ``""`` -> None).

    Raises ``ValueError``/``AssertionError`` like :func:`parse_rank_config` for bad pieces; ``all`` -> ValueError."""
    if isinstance(value, list | tuple | set | dict):
        raise ValueError(f"Invalid rank format {value!r}")
    best: int | None = None
    for piece in str(value).split(","):
        piece = piece.strip()
        if not piece:
            continue
        parts = piece.split("-")
        if len(parts) > 2:
            raise ValueError(f'Invalid rank format {piece!r}: expected format: "a,b,c-d" or "all"')
        start, end = int(parts[0]), int(parts[-1])
        assert start <= end, f"Invalid rank range {piece!r}: start {start} > end {end}"
        best = end if best is None else max(best, end)
    return best


def format_ranks(ranks: Iterable[int]) -> str:
    """``[0, 1, 2, 5]`` -> ``"0-2,5"``; ``[]`` -> ``""`` (inverse of ``parse_rank_config``)."""
    items = sorted(set(ranks))
    out: list[str] = []
    i = 0
    while i < len(items):
        j = i
        while j + 1 < len(items) and items[j + 1] == items[j] + 1:
            j += 1
        out.append(str(items[i]) if i == j else f"{items[i]}-{items[j]}")
        i = j + 1
    return ",".join(out)
