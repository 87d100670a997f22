# PYTHON_ARGCOMPLETE_OK
"""``rlark``: command-line client of the RLark Console REST API (stdlib ``urllib`` + PyYAML only).

Connection: ``--url``/``--token`` options, else ``RLARK_URL``/``RLARK_TOKEN``, else ``~/.config/rlark/config.yaml``
(``url: http://127.0.0.1:8000`` and ``token: rlk_...``; tokens are created on the account page or with
``accounts.authentication.issue_token``). Messages follow ``--lang`` / ``RLARK_LANG`` / ``LANG`` (zh or en).

Commands::

    rlark validate -f job.yaml [--rlinf rlinf.yaml]     # exit 1 when invalid
    rlark apply -f job.yaml [--rlinf rlinf.yaml] [--restart]   # create, or update when the job exists
    rlark get jobs [--phase P] [--owner U] [--search S] [-o wide|json|yaml] [-w]
    rlark get job NAME [-o wide|json|yaml] [-w]
    rlark describe job NAME                           # Workers (Pod IP, node, restarts), conditions, events
    rlark stop|start|restart|delete job NAME          # or the shortcut: rlark stop NAME
    rlark delete -f job.yaml                          # the job the file names
    rlark logs JOB [WORKER] [-f] [--previous] [--tail N] [--timestamps] [--all-workers]
    rlark exec JOB [WORKER] -- CMD [ARG...]           # exits with CMD's exit code
    rlark wait job NAME --for=phase=Running --timeout=60s
    rlark approve NAME [--all | --compatibility --site --stop --limits --data] [--stop-plan TEXT|--stop-plan-file F]
    rlark checkpoints NAME                            # each global_step_<N>: state, size, run
    rlark resume NAME [--checkpoint PATH|latest] [--run-script FILE]   # a new run from a complete checkpoint
    rlark plan -f rlinf.yaml
    rlark tracking list                               # your W&B / SwanLab credentials (never the keys)
    rlark tracking add NAME --kind wandb|swanlab [--host URL] [--entity TEAM] [--api-key-env VAR]
                                                      # the key: VAR, stdin or a prompt, never an argument
    rlark tracking delete NAME
    -o json|yaml on any command prints the API's answer as JSON/YAML.

Exit codes: see :data:`EXIT_CODES` (also printed by ``rlark --help``). Shell completion: argcomplete
(``eval "$(register-python-argcomplete rlark)"``). Output cut short by its reader (``rlark get jobs | head``)
ends quietly.
"""

from __future__ import annotations

import argparse
import os
import sys

import argcomplete

from rlark_cli import execute, get, jobs, logs, ssh, tracking
from rlark_cli.client import EXIT_FAILURE, CLIError, emit, load_config

EXAMPLES = """examples:
  rlark apply -f job.yaml                       create the job, or update it
  rlark get jobs -o wide                        every job with its nodes, restarts and message
  rlark get job my-job -w                       watch one job's phase change
  rlark describe job my-job                     Workers (Pod IP, node, restarts), conditions, events
  rlark wait job my-job --for=phase=Running --timeout=120s
  rlark logs my-job rollout-1 -f --tail 100     follow a Worker's log
  rlark logs my-job --all-workers               every Worker's log, each line prefixed [pod]
  rlark exec my-job rollout-1 -- nvidia-smi     run a command in a Worker; its exit code is rlark's
  rlark restart job my-job                      run a finished job again
  rlark delete -f job.yaml                      delete the job the file names
  rlark get jobs | head                         output cut short ends quietly

exit codes:
  0  success
  1  failure: the console cannot be reached, a server error, a file that cannot be read
  2  usage: a command line rlark does not accept
  3  not found: no such job or Worker (or one you may not see)          HTTP 404
  4  refused: not logged in, not allowed, or not in the job's state     HTTP 401/403/409
  5  invalid: the job document or the request has errors               HTTP 400/422, rlark validate
  6  timed out: rlark wait, or a command of rlark exec that ran too long
  rlark exec exits with the command's own exit code when the command ran.

shell completion (bash, zsh): eval "$(register-python-argcomplete rlark)"
"""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="rlark",
        description="RLark Console command-line client (kubectl's grammar: rlark VERB job NAME)",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--url", help="console URL (default: RLARK_URL or the config file)")
    common.add_argument("--token", help="API token (default: RLARK_TOKEN or the config file)")
    common.add_argument("--lang", help="zh or en (message language)")
    common.add_argument(
        "-o", "--output", choices=["json", "yaml", "wide"], help="JSON or YAML: the API answer; wide: more columns"
    )
    sub = parser.add_subparsers(dest="command", required=True)

    jobs.add_commands(sub, common)
    get.add_commands(sub, common)  # rlark get, describe, wait
    logs.add_commands(sub, common)  # rlark logs
    execute.add_commands(sub, common)  # rlark exec
    ssh.add_commands(sub, common)  # rlark ssh, rlark ssh-config
    tracking.add_commands(sub, common)  # rlark tracking list|add|delete
    return parser


def parse_args(argv: list[str]) -> argparse.Namespace:
    """The parsed command line. ``rlark ssh JOB -- CMD``: what follows ``--`` is the command, never the Worker
    (argparse alone would fill the optional Worker with CMD's first word)."""
    after: list[str] | None = None
    if argv[:1] in (["ssh"], ["exec"]) and "--" in argv:
        cut = argv.index("--")
        argv, after = argv[:cut], argv[cut + 1 :]
    parser = build_parser()
    argcomplete.autocomplete(parser)  # answers the shell's completion request and exits; nothing otherwise
    args = parser.parse_args(argv)
    if after is not None and args.command == "exec":
        args.exec_command = after
    elif after is not None:
        args.command = [*(args.command or []), *after]
    return args


def main(argv: list[str] | None = None) -> int:
    try:
        return _run(list(sys.argv[1:] if argv is None else argv))
    except BrokenPipeError:
        return _quiet_broken_pipe()
    except KeyboardInterrupt:
        return 130


def _run(argv: list[str]) -> int:
    args = parse_args(argv)
    try:
        client = load_config(args)
        return args.func(client, args)
    except CLIError as exc:
        if args.output in ("json", "yaml") and exc.body is not None:
            emit(args, exc.body)
        print(f"Error: {exc}", file=sys.stderr)
        return exc.code


def _quiet_broken_pipe() -> int:
    """The reader of stdout went away (``rlark get jobs | head``): end as ``kubectl`` does, without a traceback.
    stdout is pointed at /dev/null so the interpreter's last flush cannot raise again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass
    return EXIT_FAILURE


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
