"""Entry point of the `costsim` command. Each command group lives in its own module here.

Command modules import only what parsing needs at load time; the library (and numpy, pandas,
simpy) is imported inside the command functions so that `costsim --help` stays instant.
"""

from __future__ import annotations

import sys

import typer

from . import predict as _predict
from . import live_cmd as _live
from . import profiles_cmd as _profiles
from . import roofline_cmd as _roofline
from . import simulate_cmd as _simulate
from . import traces_cmd as _traces
from ._common import UserError

app = typer.Typer(
    name="costsim",
    help="What a weak-drafts/strong-reviews agent protocol (SpecAgent) costs on your hardware.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

app.command("predict")(_predict.predict)
app.command("roofline")(_roofline.roofline)
app.command("simulate")(_simulate.simulate)
app.command("replay")(_simulate.replay)
app.add_typer(_profiles.hardware_app, name="hardware")
app.command("calibrate")(_live.calibrate)
app.command("validate")(_live.validate)
app.command("serve-local")(_live.serve_local)
app.add_typer(_profiles.models_app, name="models")
app.add_typer(_traces.traces_app, name="traces")


def main(argv: list[str] | None = None) -> int:
    """Run the CLI; a :class:`UserError` or profile error becomes one line on stderr, exit 2.

    Usage errors (bad flag values) are click's own: one message, exit 2.
    """
    from costsim.profiles import ProfileError

    try:
        app(args=argv, prog_name="costsim")
    except SystemExit as e:  # click's standalone mode exits even on success
        return e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    except (UserError, ProfileError) as e:
        print(f"costsim: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("costsim: interrupted", file=sys.stderr)
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
