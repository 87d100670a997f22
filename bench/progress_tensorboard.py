"""The cost of the TensorBoard progress read the status sync adds per job (``jobs.observe.progress_tensorboard``).

Writes a real event file with tensorboard's own writer (``--events`` scalar events, about 60 bytes each), then
times the first look (the whole file, up to ``MAX_BYTES``) against a later look after 100 more events were
appended (only the new bytes). Goal: the later look costs a small fraction of the first (ratio <= 0.1 at 100,000
events) and reads only the appended bytes. Called by ``bench/progress.py``; alone::

    .venv/bin/python bench/progress_tensorboard.py [--events 100000] [--quick: 10,000 events]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.quick import quick_defaults  # noqa: E402


def write(writer, start: int, count: int) -> None:
    """``count`` steps from ``start``, each one ``train/global_step`` scalar event, flushed."""
    from tensorboard.compat.proto.event_pb2 import Event
    from tensorboard.compat.proto.summary_pb2 import Summary

    for step in range(start, start + count):
        value = Summary.Value(tag="train/global_step", simple_value=step)
        writer.add_event(Event(step=step, summary=Summary(value=[value])))
    writer.flush()


def measure(events: int) -> tuple[float, float, int, int]:
    """(first look ms, later look ms, bytes of the later look, bytes appended) for a file of ``events`` events."""
    from tensorboard.summary.writer.event_file_writer import EventFileWriter

    from jobs.observe import progress_tensorboard as tbp

    with tempfile.TemporaryDirectory() as directory:
        writer = EventFileWriter(directory, max_queue_size=1000)
        write(writer, 1, events)
        state = tbp.JobState(directory)
        t0 = time.perf_counter()
        tbp.read_on(state)
        first = (time.perf_counter() - t0) * 1000
        (name,) = [n for n in os.listdir(directory) if "tfevents" in n]
        size = os.path.getsize(os.path.join(directory, name))
        write(writer, events + 1, 100)
        appended = os.path.getsize(os.path.join(directory, name)) - size
        t0 = time.perf_counter()
        tbp.read_on(state)
        later = (time.perf_counter() - t0) * 1000
        writer.close()
        assert tbp.step_of(state) == events + 100, tbp.step_of(state)
    return first, later, state.bytes_read, appended


def report(events: int) -> None:
    """Print the two looks' times and their ratio."""
    first, later, read, appended = measure(events)
    print(f"\nTensorBoard progress read, one job, {events} scalar events then 100 more:")
    print(f"first look {first:8.1f} ms; later look {later:6.2f} ms ({read} of {appended} appended bytes parsed)")
    print(f"later / first look time ratio: {later / first:.3f} (goal <= 0.1)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=100_000)
    quick_defaults(parser, events=10_000)
    report(parser.parse_args().events)


if __name__ == "__main__":
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "rlark_console.settings")
    import django

    django.setup()
    main()
