"""Entry point of the `costsim` command. Each command group lives in its own module here.

Command modules import only what parsing needs at load time; the library (and numpy, pandas,
simpy) is imported inside the command functions so that `costsim --help` stays instant.
"""

from __future__ import annotations

import sys

import typer

from . import acceptance_cmd as _acceptance
from . import bench_cmd as _bench
from . import capacity_cmd as _capacity
from . import figures_cmd as _figures
from . import live_cmd as _live
from . import plan_cmd as _plan
from . import predict_cmd as _predict
from . import profiles_cmd as _profiles
from . import protocols_cmd as _protocols
from . import report_cmd as _report
from . import roofline_cmd as _roofline
from . import simulate_cmd as _simulate
from . import sweep_cmd as _sweep
from . import traces_cmd as _traces
from . import ui_cmd as _ui
from ._common import UserError, shown, warn

app = typer.Typer(
    name="costsim",
    help="What a weak-drafts/strong-reviews agent protocol (SpecAgent) costs on your hardware.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

# The analytic model, then the simulator, then live mode, then data.
app.command("predict")(_predict.predict)
app.add_typer(_roofline.roofline_app, name="roofline")
app.command("bench")(_bench.bench)
app.command("simulate")(_simulate.simulate)
app.command("replay")(_simulate.replay)
app.command("capacity")(_capacity.capacity)
app.command("plan")(_plan.plan)
app.command("report")(_report.report)
app.command("sweep")(_sweep.sweep)
app.command("protocols")(_protocols.protocols)
app.command("figures")(_figures.figures)
app.command("calibrate")(_live.calibrate)
app.command("acceptance")(_acceptance.acceptance)
app.command("validate")(_live.validate)
app.command("serve-local")(_live.serve_local)
app.add_typer(_traces.traces_app, name="traces")
app.add_typer(_profiles.hardware_app, name="hardware")
app.add_typer(_profiles.models_app, name="models")
app.command("ui")(_ui.ui)


#: Flags renamed so that a name means one thing in every command: (command, old spelling) ->
#: new. The old spelling works for one release, with a warning line on stderr.
RENAMED_FLAGS = {("calibrate", "--weak"): "--weak-url", ("calibrate", "--strong"): "--strong-url",
                 ("validate", "--weak"): "--weak-url", ("validate", "--strong"): "--strong-url",
                 ("traces stats", "--tasks"): "--per-task", ("traces stats", "--no-tasks"): "--no-per-task",
                 # the output flags: -o/--out is a command's output file, --out-dir its folder,
                 # --<what>-out a second output
                 ("calibrate", "--output"): "--out", ("validate", "--save-calibration"): "--calibration-out",
                 ("plan", "--figure"): "--figure-out", ("figures", "--out"): "--out-dir",
                 # --trace is a trace whose tasks are run; the live mode reads only a step shape from one
                 ("calibrate", "--trace"): "--shape-trace", ("validate", "--trace"): "--shape-trace"}


def renamed_flags(argv: list[str]) -> list[str]:
    """``argv`` with each old spelling of :data:`RENAMED_FLAGS` replaced by the new one, each
    replacement announced on stderr as deprecated."""
    words = []
    for a in argv:
        if a.startswith("-"):
            break
        words.append(a)
    out = []
    for a in argv:
        flag, eq, value = a.partition("=")
        new = next((n for (cmd, old), n in RENAMED_FLAGS.items() if flag == old and words[:len(cmd.split())] == cmd.split()),
                   None)
        if new:
            print(f"costsim: warning: {flag} is deprecated in 'costsim {' '.join(words[:2])}': use {new} (the old "
                  "spelling goes in the next release)", file=sys.stderr)
            a = new + eq + value
        out.append(a)
    return out


def main(argv: list[str] | None = None) -> int:
    """Run the CLI. Bad input — a usage error, a :class:`UserError`, a profile error — becomes
    one line on stderr and exit code 2, never a traceback."""
    import warnings

    import click

    from costsim.api import INPUT_ERRORS

    # A warning meant for the user (a deprecated profile field) is one line, as an error is: no
    # source line, no file of costsim's.
    warnings.showwarning = lambda message, *a, **k: warn(str(message))
    # A terminal or pipe that cannot encode a character (PYTHONIOENCODING=latin-1 and a '≈')
    # shows a replacement for it rather than failing.
    for stream in (sys.stdout, sys.stderr):
        if hasattr(stream, "reconfigure"):
            stream.reconfigure(errors="replace")

    try:
        rv = app(args=renamed_flags(sys.argv[1:] if argv is None else list(argv)), prog_name="costsim",
                 standalone_mode=False)
    except click.UsageError as e:
        if not e.format_message():  # a group called alone: click has printed its help already
            return 2
        hint = f" (see 'costsim {e.ctx.command_path.partition(' ')[2]} --help')".replace("  ", " ") if e.ctx else ""
        print(f"costsim: error: {shown(e.format_message())}{hint}", file=sys.stderr)
        return 2
    except (UserError, *INPUT_ERRORS) as e:
        print(f"costsim: error: {shown(e)}", file=sys.stderr)
        return 2
    except (KeyboardInterrupt, click.Abort):
        return _interrupted()
    except click.ClickException as e:
        print(f"costsim: error: {shown(e.format_message())}", file=sys.stderr)
        return e.exit_code
    if rv == 130:  # Typer turns Ctrl-C into Exit(130), which click hands back as the return value
        return _interrupted()
    return rv if isinstance(rv, int) else 0


def _interrupted() -> int:
    """One line and the shell's code for the signal: 143 for SIGTERM, 130 for Ctrl-C."""
    from . import Terminated

    print(f"costsim: {'terminated' if Terminated.received else 'interrupted'}", file=sys.stderr)
    return 143 if Terminated.received else 130


if __name__ == "__main__":
    from . import run

    run()
