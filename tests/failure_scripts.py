"""Scripts of real failures that the failure tests run on both runtimes (seed 05-troubleshooting-jobs-workers)."""

from __future__ import annotations

# A traceback after an INFO line that holds "failed": the INFO line is routine output, never the first error
TRACEBACK = (
    'python3 -c "import json, logging; logging.basicConfig(level=logging.INFO); '
    "logging.info('warm-up request failed, retrying'); json.loads('{')\""
)
# rollout-1 is told a head that does not exist: its Ray node never joins
LOST_ONE = 'if [ "${POD_NAME##*-}" = 1 ]; then export RLARK_HEAD_ADDRESS=head.invalid RLARK_HEAD_WAIT_ATTEMPTS=2; fi'
PREPARE_EXIT_2 = "echo 'cat: /data/robot.yaml: No such file or directory' >&2; exit 2"


def crash_once(directory: str) -> str:
    """A prepare script whose first container crashes with a traceback; ``directory`` outlives a restart."""
    mark = f"{directory}/first-container"
    return (
        f"if [ ! -e {mark} ]; then touch {mark}; python3 -c \"raise RuntimeError('boom in the first container')\"; fi"
    )
