"""``python -m rlark_config --markdown`` prints the README's configuration table; ``--readme`` writes it into
README.md between its markers."""

from __future__ import annotations

import argparse
import sys

from rlark_config import table


def main(argv: list[str] | None = None) -> int:
    """Run the command; returns the exit status (0)."""
    parser = argparse.ArgumentParser(prog="python -m rlark_config", description=__doc__)
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--markdown", action="store_true", help="print the README's configuration table")
    mode.add_argument("--readme", action="store_true", help="write the table into README.md")
    args = parser.parse_args(argv)
    if args.markdown:
        sys.stdout.write(table.markdown())
    else:
        print("README.md updated" if table.write_readme() else "README.md is up to date")
    return 0


if __name__ == "__main__":
    sys.exit(main())
