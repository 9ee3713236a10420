"""The `costsim` command line: thin Typer commands that parse, call the library and print."""

import signal
import sys


class Terminated(KeyboardInterrupt):
    """SIGTERM (kill, timeout, systemd, Docker, Slurm), handled as Ctrl-C is: whatever is being
    written is removed (the atomic writer and the output check clean up on any interrupt).
    ``received``: whether one came (click turns any KeyboardInterrupt into its own Abort)."""

    received = False


def _terminate(signum, frame):
    Terminated.received = True
    raise Terminated


def run() -> None:
    """The console entry point. The CLI's imports (Typer, click) take a moment: an interrupt or a
    SIGTERM during them, too, is one line, not a traceback."""
    signal.signal(signal.SIGTERM, _terminate)
    try:
        from .main import main
    except KeyboardInterrupt as e:
        print(f"costsim: {'terminated' if isinstance(e, Terminated) else 'interrupted'}", file=sys.stderr)
        sys.exit(143 if isinstance(e, Terminated) else 130)
    sys.exit(main())
