"""The one loader for shipped data folders: hardware/, models/, traces/, benchmarks/measured/.

In an installed wheel they are the packages ``costsim.data.<folder>`` (pyproject maps the
top-level folders there). Imported straight from a checkout (``python -m``, tests run in the
repository root) the top-level folders themselves are used.
"""

from __future__ import annotations

from importlib import resources
from importlib.abc import Traversable
from pathlib import Path


#: Where a data package lives in a checkout, when not at the top level under its own name.
_CHECKOUT = {"measured": "benchmarks/measured"}


def data_dir(folder: str) -> Traversable:
    """The shipped data folder ``folder`` ('hardware', 'models', 'traces' or 'measured')."""
    try:
        return resources.files(f"costsim.data.{folder}")
    except ModuleNotFoundError:
        checkout = Path(__file__).resolve().parent.parent / _CHECKOUT.get(folder, folder)
        if checkout.is_dir():
            return checkout
        raise
