"""RLark local-runtime ``ray`` CLI (run by the ``ray`` shim, first on PATH for local Workers): keeps Ray on
loopback (see rlark_ray_local) and adds the node's own ports before calling Ray's CLI main."""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.realpath(__file__)))

import rlark_ray_local  # noqa: E402

if sys.argv[1:2] == ["stop"] and rlark_ray_local.active() and not rlark_ray_local.ray_processes():
    sys.exit(0)  # nothing to stop in this Worker's PID namespace: skip importing Ray (saves seconds)
rlark_ray_local.patch()
sys.argv[0] = "ray"
sys.argv[1:] = rlark_ray_local.local_start_args(sys.argv[1:])
from ray.scripts.scripts import main  # noqa: E402

sys.exit(main())
