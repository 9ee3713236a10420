"""The one loader for shipped data folders: hardware/, models/, traces/.

In an installed wheel they are the packages ``costsim.data.<folder>`` (pyproject maps the
top-level folders there). Imported straight from a checkout (``python -m``, tests run in the
repository root) the top-level folders themselves are used.
"""

from __future__ import annotations

from importlib import resources
from importlib.abc import Traversable
from pathlib import Path


def data_dir(folder: str) -> Traversable:
    """The shipped data folder ``folder`` ('hardware', 'models' or 'traces')."""
    try:
        return resources.files(f"costsim.data.{folder}")
    except ModuleNotFoundError:
        checkout = Path(__file__).resolve().parent.parent / folder
        if checkout.is_dir():
            return checkout
        raise
