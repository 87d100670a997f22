"""RLark Console's settings in one typed, frozen object: :class:`Config`, read from the environment.

- :mod:`rlark_config.schema`: the fields (type, default, variable, one-line doc, parser);
- :func:`load` (``environ -> Config``, :class:`ConfigError` naming the variable of a bad value) and
  :func:`current` (the process's copy, read once);
- :mod:`rlark_config.table`: the README's configuration table (``python -m rlark_config --markdown``).

``rlark_console.settings`` gives Django its settings from :func:`current`; every other module reads Django's
settings or :func:`current`, never an ``RLARK_*`` variable (``tests/console/test_config.py``). Not settings here:
the variables the console sets into Workers (the Pod's contract, read by the scripts under ``clusters/scripts``)
and those of the ``rlark`` client (``rlark_cli``, which runs on users' machines).

Standard library only and no Django: the local supervisor (``python -m clusters.runtime.local``) reads it too,
and ``rlark_console``'s package would start Celery and Django's settings.
"""

from rlark_config.loading import ENV_NAMES, ConfigError, current, load
from rlark_config.schema import Config

__all__ = ["ENV_NAMES", "Config", "ConfigError", "current", "load"]
