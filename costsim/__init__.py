"""costsim: what a weak-drafts/strong-reviews agent protocol (SpecAgent) costs on your hardware.

The analytic twin lives in :mod:`costsim.formulas`, per-iteration hardware costs in
:mod:`costsim.roofline`, profiles in :mod:`costsim.profiles`. Heavy modules (the simulator,
pandas, matplotlib) are imported only by the commands that need them.
"""

__version__ = "0.1.0"
