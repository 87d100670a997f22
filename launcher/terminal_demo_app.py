"""What ``launcher.terminal_demo`` uses once Django is set up (importing this module loads the models, so the demo
imports it only after it has pointed the settings at its own ``--dir``)."""

import clusters.runtime.registry as registry
from launcher.asgi import application
from terminal.demo_runtime import DirRuntime, seed_job
from terminal.services.runtimes import use_runtime_factory

__all__ = ["DirRuntime", "application", "registry", "seed_job", "use_runtime_factory"]
