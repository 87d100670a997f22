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
