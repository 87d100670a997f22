"""ANSI escape sequences -> safe HTML for the Logs tab, or stripped for the logs API (``?ansi=strip``).

Rule (peers 5.2 "Escaping"): log text is untrusted. Every text segment is
HTML-escaped *before* it is wrapped in a ``<span>``; the only markup we emit is spans whose
class names and inline colours are computed from integers we parsed, never copied from
the input. Non-SGR escape sequences (cursor moves, erase, OSC titles/hyperlinks) and
control characters other than TAB are dropped. A carriage return keeps only the text after
it (what a terminal shows for progress bars such as tqdm).
"""

from __future__ import annotations

import html
import re

# CSI (ESC [ params final), OSC (ESC ] ... BEL|ST), other 2-byte escapes.
_ESCAPE_RE = re.compile(r"\x1b\[([0-9;:?<=>]*)([@-~])|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?|\x1b[@-Z\\-_]?")
_CONTROL_RE = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")

# xterm's default 16-colour palette (for 38;5;n / 48;5;n with n < 16 we use classes instead).
_CUBE = (0, 95, 135, 175, 215, 255)


def _xterm256(n: int) -> str:
    """``#rrggbb`` of xterm colour ``n`` (16..255)."""
    if n < 232:
        n -= 16
        r, g, b = _CUBE[n // 36], _CUBE[(n // 6) % 6], _CUBE[n % 6]
    else:
        r = g = b = 8 + (n - 232) * 10
    return f"#{r:02x}{g:02x}{b:02x}"


class _State:
    __slots__ = ("bold", "dim", "italic", "underline", "fg", "bg")

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.bold = self.dim = self.italic = self.underline = False
        self.fg: str | None = None  # "c3" (class) or "#rrggbb"
        self.bg: str | None = None

    def empty(self) -> bool:
        return not (self.bold or self.dim or self.italic or self.underline or self.fg or self.bg)

    def open_tag(self) -> str:
        classes: list[str] = []
        styles: list[str] = []
        if self.bold:
            classes.append("ansi-bold")
        if self.dim:
            classes.append("ansi-dim")
        if self.italic:
            classes.append("ansi-italic")
        if self.underline:
            classes.append("ansi-underline")
        for kind, value in (("fg", self.fg), ("bg", self.bg)):
            if value is None:
                continue
            if value.startswith("#"):
                styles.append(f"{'color' if kind == 'fg' else 'background-color'}:{value}")
            else:
                classes.append(f"ansi-{kind}-{value}")
        attrs = f' class="{" ".join(classes)}"' if classes else ""
        if styles:
            attrs += f' style="{";".join(styles)}"'
        return f"<span{attrs}>"

    def apply(self, params: str) -> None:
        codes = [int(p) if p.isdigit() else 0 for p in params.replace(":", ";").split(";")] if params else [0]
        i = 0
        while i < len(codes):
            c = codes[i]
            if c == 0:
                self.reset()
            elif c == 1:
                self.bold = True
            elif c == 2:
                self.dim = True
            elif c == 3:
                self.italic = True
            elif c == 4:
                self.underline = True
            elif c == 22:
                self.bold = self.dim = False
            elif c == 23:
                self.italic = False
            elif c == 24:
                self.underline = False
            elif 30 <= c <= 37:
                self.fg = str(c - 30)
            elif 90 <= c <= 97:
                self.fg = str(c - 90 + 8)
            elif c == 39:
                self.fg = None
            elif 40 <= c <= 47:
                self.bg = str(c - 40)
            elif 100 <= c <= 107:
                self.bg = str(c - 100 + 8)
            elif c == 49:
                self.bg = None
            elif c in (38, 48) and i + 1 < len(codes):
                colour: str | None = None
                if codes[i + 1] == 5 and i + 2 < len(codes):
                    n = max(0, min(255, codes[i + 2]))
                    colour = str(n) if n < 16 else _xterm256(n)
                    i += 2
                elif codes[i + 1] == 2 and i + 4 < len(codes):
                    r, g, b = (max(0, min(255, v)) for v in codes[i + 2 : i + 5])
                    colour = f"#{r:02x}{g:02x}{b:02x}"
                    i += 4
                if c == 38:
                    self.fg = colour
                else:
                    self.bg = colour
            i += 1


def _last_carriage_segment(line: str) -> str:
    if "\r" in line:
        parts = [p for p in line.split("\r") if p]
        return parts[-1] if parts else ""
    return line


def strip_ansi(line: str) -> str:
    """The visible text of ``line``: escapes and control characters removed (used for search)."""
    if line.isprintable():  # the common case: nothing to strip (C-speed check)
        return line
    line = _last_carriage_segment(line)
    return _CONTROL_RE.sub("", _ESCAPE_RE.sub("", line))


def strip_text(text: str) -> str:
    """A whole log without escape sequences, line by line (what the Logs tab's plain-text links serve).

    Each line is what :func:`strip_ansi` shows (a carriage-return progress bar keeps its last
    state); line breaks and a final newline are kept."""
    if "\x1b" not in text and "\r" not in text:
        return text
    return "\n".join(strip_ansi(line) for line in text.split("\n"))


def has_ansi(line: str) -> bool:
    """True when ``line`` contains an escape sequence (so it needs :func:`to_html`)."""
    return "\x1b" in line


def to_html(line: str) -> str:
    """Safe HTML for one log line: escaped text in ``<span class="ansi-...">`` runs.

    The result contains no markup other than ``<span>`` with our own class names and
    ``color``/``background-color`` inline styles built from parsed integers.
    """
    line = _last_carriage_segment(line)
    out: list[str] = []
    state = _State()
    span_open = False
    pos = 0
    for m in _ESCAPE_RE.finditer(line):
        text = _CONTROL_RE.sub("", line[pos : m.start()])
        if text:
            out.append(html.escape(text, quote=True))
        pos = m.end()
        if m.group(2) == "m":  # SGR
            if span_open:
                out.append("</span>")
                span_open = False
            state.apply(m.group(1) or "")
            if not state.empty():
                out.append(state.open_tag())
                span_open = True
    text = _CONTROL_RE.sub("", line[pos:])
    if text:
        out.append(html.escape(text, quote=True))
    if span_open:
        out.append("</span>")
    return "".join(out)
