"""python -m scheduler.scenarios FILE... — play scenario files through the pure scheduler."""

from __future__ import annotations

import argparse
import sys

from scheduler.scenarios.cli import run_files
from scheduler.scenarios.world import PureWorld


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m scheduler.scenarios",
        description="Play scheduling scenario files through the pure scheduler.",
    )
    parser.add_argument("files", nargs="+", metavar="FILE", help="scenario JSON files")
    args = parser.parse_args(argv)
    return run_files(
        args.files,
        PureWorld.of,
        print,
    )


if __name__ == "__main__":
    sys.exit(main())
