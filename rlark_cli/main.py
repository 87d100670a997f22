"""``rlark``: command-line client of the RLark Console REST API (stdlib ``urllib`` + PyYAML only).

Connection: ``--url``/``--token`` options, else ``RLARK_URL``/``RLARK_TOKEN``, else ``~/.config/rlark/config.yaml``
(``url: http://127.0.0.1:8000`` and ``token: rlk_...``; tokens are created on the account page or with
``accounts.authentication.issue_token``). Messages follow ``--lang`` / ``RLARK_LANG`` / ``LANG`` (zh or en).

Commands::

    rlark validate -f job.yaml [--rlinf rlinf.yaml]     # exit 1 when invalid
    rlark apply -f job.yaml [--rlinf rlinf.yaml] [--restart]   # create, or update when the job exists
    rlark get jobs [--phase P] [--owner U] [--search S]
    rlark describe job NAME
    rlark stop|start|restart|delete NAME
    rlark approve NAME [--all | --compatibility --site --stop --limits --data] [--stop-plan TEXT|--stop-plan-file F]
    rlark checkpoints NAME                            # each global_step_<N>: state, size, run
    rlark resume NAME [--checkpoint PATH|latest] [--run-script FILE]   # a new run from a complete checkpoint
    rlark plan -f rlinf.yaml
    rlark tracking list                               # your W&B / SwanLab credentials (never the keys)
    rlark tracking add NAME --kind wandb|swanlab [--host URL] [--entity TEAM] [--api-key-env VAR]
                                                      # the key: VAR, stdin or a prompt, never an argument
    rlark tracking delete NAME
    -o json|yaml on any command prints the API's answer as JSON/YAML.

Exit codes: 0 success, 1 failure (invalid job, HTTP error, unreachable server), 2 usage errors.
"""

from __future__ import annotations

import argparse
import sys

from rlark_cli import jobs, ssh, tracking
from rlark_cli.client import CLIError, emit, load_config


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="rlark", description="RLark Console command-line client")
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--url", help="console URL (default: RLARK_URL or the config file)")
    common.add_argument("--token", help="API token (default: RLARK_TOKEN or the config file)")
    common.add_argument("--lang", help="zh or en (message language)")
    common.add_argument("-o", "--output", choices=["json", "yaml"], help="print the API answer as JSON or YAML")
    sub = parser.add_subparsers(dest="command", required=True)

    jobs.add_commands(sub, common)
    ssh.add_commands(sub, common)  # rlark ssh, rlark ssh-config
    tracking.add_commands(sub, common)  # rlark tracking list|add|delete
    return parser


def parse_args(argv: list[str]) -> argparse.Namespace:
    """The parsed command line. ``rlark ssh JOB -- CMD``: what follows ``--`` is the command, never the Worker
    (argparse alone would fill the optional Worker with CMD's first word)."""
    after: list[str] | None = None
    if argv[:1] == ["ssh"] and "--" in argv:
        cut = argv.index("--")
        argv, after = argv[:cut], argv[cut + 1 :]
    args = build_parser().parse_args(argv)
    if after is not None:
        args.command = [*(args.command or []), *after]
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(list(sys.argv[1:] if argv is None else argv))
    try:
        client = load_config(args)
        return args.func(client, args)
    except CLIError as exc:
        if args.output and exc.body is not None:
            emit(args, exc.body)
        print(f"Error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:  # pragma: no cover
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
