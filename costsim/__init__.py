"""costsim: what a weak-drafts/strong-reviews agent protocol (SpecAgent) costs on your hardware.

The Python API is :mod:`costsim.api`, every command as a function; its main ones are here too::

    from costsim import predict, simulate, replay, capacity, plan
    predict(p_accept=0.8, K=6)["L"]

The layers below it (docs/architecture.md): the defaults (:mod:`costsim.config`) and closed
forms (:mod:`costsim.formulas`); profiles and traces; the roofline, memory, sizing and fleet
cost; the protocols' schedules; the scenario; the drivers (the simulator :mod:`costsim.sim`, the
exact twin :mod:`costsim.twin`, live mode); the analyses. Importing this package imports none
of them: each loads when first used.
"""

__version__ = "0.1.0"

#: What ``from costsim import ...`` gives of :mod:`costsim.api`.
_API = ("predict", "simulate", "replay", "capacity", "plan", "load_trace", "import_trace")
__all__ = list(_API)


def __getattr__(name: str):
    if name in _API:
        from . import api

        return getattr(api, name)
    raise AttributeError(f"module 'costsim' has no attribute {name!r}")
