"""`costsim ui`: the what-if page, served on this machine until Ctrl-C."""

from __future__ import annotations

import typer

from ._common import user_errors, warn


def ui(
    port: int = typer.Option(0, "--port", min=0, max=65535, help="Port to listen on [0: any free one]."),
    host: str = typer.Option("127.0.0.1", "--host", help="Address to listen on. Any but a loopback one serves the page, "
                                                          "which has no authentication, to whoever reaches this machine."),
    no_open: bool = typer.Option(False, "--no-open", help="Do not open a browser (only print the URL)."),
):
    """A what-if page in the browser: predict's numbers as the sliders move, plan on demand.

    Served on this machine (127.0.0.1 by default) until Ctrl-C; every number on it comes from
    costsim predict and costsim plan.
    """
    from costsim import api

    with user_errors(ValueError):
        server = api.ui_server(host=host, port=port)
    try:
        if not server.loopback:
            warn(f"--host {host}: the page is served beyond this machine and has no authentication: anyone who "
                 f"reaches port {server.port} can use it")
        typer.echo(f"costsim ui: {server.url}  (Ctrl-C stops it)")
        if not no_open:
            server.open_browser()
        server.serve_forever()
    finally:
        server.shutdown()
