"""Reading :class:`~rlark_config.schema.Config` from an environment, and the process's one copy of it."""

from __future__ import annotations

import os
import threading
from collections.abc import Mapping
from typing import Any

from rlark_config.schema import Config, fields


class ConfigError(ValueError):
    """A variable's value cannot be read; the message starts with the variable's name."""


ENV_NAMES: tuple[str, ...] = tuple(f.metadata["env"] for f in fields())
_NAMES = frozenset(ENV_NAMES)
# A setting whose default is another's value plus a part: RLARK_LOCAL_ROOT is RLARK_VAR_DIR/local unless set.
DERIVED = {"local_root": lambda values: values["var_dir"] / "local"}


def load(environ: Mapping[str, str]) -> Config:
    """The :class:`Config` that ``environ`` describes: each variable that is set is read by its field's parser,
    each one that is not keeps the default. Raises :class:`ConfigError` ``"<VARIABLE>: <reason>"`` for a value
    that is not of the field's type or out of its bounds."""
    values: dict[str, Any] = {}
    for f in fields():
        env = f.metadata["env"]
        if env not in environ:
            continue
        try:
            values[f.name] = f.metadata["parse"](environ[env])
        except ValueError as exc:
            raise ConfigError(f"{env}: {exc}") from None
    for name, derive in DERIVED.items():
        if name not in values:
            values[name] = derive({f.name: values.get(f.name, f.default) for f in fields()})
    return Config(**values)


_lock = threading.Lock()
_loaded: tuple[tuple[tuple[str, str], ...], Config] | None = None


def _snapshot(environ: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
    """The settings' variables in ``environ``, ``(name, value)`` (tens of microseconds)."""
    return tuple(item for item in environ.items() if item[0] in _NAMES)


def current() -> Config:
    """This process's settings: :func:`load` of ``os.environ``, read on the first call and kept.

    A process's environment does not change in production, so it is read once. When it does (a test's
    ``monkeypatch.setenv``, a bench script setting a variable before it starts a server), the next call reads the
    settings again, as reading the variable at that moment used to. Raises :class:`ConfigError` like :func:`load`.
    """
    global _loaded
    snapshot = _snapshot(os.environ)
    loaded = _loaded
    if loaded is not None and loaded[0] == snapshot:
        return loaded[1]
    config = load(dict(snapshot))
    with _lock:
        _loaded = (snapshot, config)
    return config
