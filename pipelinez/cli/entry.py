"""The `pz` console script. Records SIGINTs and SIGTERMs before anything heavy is imported, so a Ctrl-C (or a
SIGTERM) while pz starts up is one PZ0514 line too (see `interrupts`), then runs the command line."""

from __future__ import annotations

import sys

from pipelinez.cli import interrupts


def main() -> None:
    interrupts.install()
    try:
        from pipelinez.cli.main import main as run
    except (KeyboardInterrupt, ImportError):
        if not interrupts.tripped():
            raise
        sys.stderr.write("error: PZ0514 interrupted while pz was starting: nothing ran\n")
        interrupts.exit_now(1)
    try:
        run()
    except KeyboardInterrupt:  # a stop signal in the instant between the command's end and `ending`
        if not interrupts.tripped():
            raise
        sys.stderr.write("error: PZ0514 interrupted as pz was ending\n")
        interrupts.exit_now(1)
