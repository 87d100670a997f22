"""Applies the RLark local-runtime loopback patch to every Python process of a local Worker
(drivers calling ``ray.init``, ``ray_check.py``, Ray's own workers, and a ``ray`` CLI from another
environment), lazily: nothing is imported until ``ray._private.services`` is."""

from __future__ import annotations

import importlib.abc
import importlib.util
import os
import sys


class _RayServicesHook(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name not in ("ray._private.services", "ray.scripts.scripts"):
            return None
        sys.meta_path.remove(self)
        try:
            spec = importlib.util.find_spec(name)
        finally:
            sys.meta_path.insert(0, self)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        original = spec.loader.exec_module

        def exec_module(module, _original=original, _name=name):
            _original(module)
            import rlark_ray_local

            if _name == "ray._private.services":
                rlark_ray_local.patch(module)
            elif sys.argv and os.path.basename(sys.argv[0]) == "ray":
                sys.argv[1:] = rlark_ray_local.local_start_args(sys.argv[1:])

        spec.loader.exec_module = exec_module
        return spec


if os.environ.get("RLARK_LOCAL_RUNTIME") == "1" and not any(isinstance(f, _RayServicesHook) for f in sys.meta_path):
    sys.meta_path.insert(0, _RayServicesHook())


def _chain_next_sitecustomize() -> None:
    """Run the ``sitecustomize`` this one shadows (a venv's or the system's), if any."""
    here = os.path.dirname(os.path.abspath(__file__))
    import importlib.machinery

    rest = [p for p in sys.path if os.path.abspath(p or ".") != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
    if spec is None or spec.loader is None or os.path.dirname(os.path.abspath(spec.origin or "")) == here:
        return
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except Exception as exc:  # noqa: BLE001 - like site.py: report and continue
        print(f"Error in sitecustomize; set PYTHONVERBOSE for traceback:\n{exc!r}", file=sys.stderr)


_chain_next_sitecustomize()
