"""The `pz` console script. Records SIGINTs and SIGTERMs before anything heavy is imported, so a Ctrl-C (or a
SIGTERM) while pz starts up is one PZ0514 line too (see `interrupts`), then runs the command line. When the
command has ended, the process leaves at once with its exit code (`interrupts.exit_now`): a signal can then
never land in Python's own shutdown, where it printed a traceback or, once Python had put the default
handlers back, killed a finished run with 143. (`pipelinez.cli.main.main`, called from Python, still ends
with SystemExit.) A bare `pz --version` is answered here, before click and the command line are imported.
"""

from __future__ import annotations

import sys

from pipelinez.cli import interrupts


def main() -> None:
    interrupts.install()
    if sys.argv[1:] == ["--version"]:  # what click's version option prints, without importing click
        from pipelinez import __version__

        sys.stdout.write(f"pz, version {__version__}\n")
        interrupts.exit_now(0)
    try:
        from pipelinez.cli.main import main as run
    except (KeyboardInterrupt, ImportError):
        if not interrupts.tripped():
            raise
        sys.stderr.write("error: PZ0514 interrupted while pz was starting: nothing ran\n")
        interrupts.exit_now(1)
    try:
        run()
    except SystemExit as done:  # the command has ended: the `pz` process leaves now, no shutdown window
        interrupts.exit_now(done.code if isinstance(done.code, int) else int(done.code is not None))
    except KeyboardInterrupt:  # a stop signal in the instant between the command's end and the exit
        if not interrupts.tripped():
            raise
        sys.stderr.write("error: PZ0514 interrupted as pz was ending\n")
        interrupts.exit_now(1)
