"""Plan a deployment: the cheapest fleet that serves a task rate under a p95 latency target,
searched over strong device × GPUs per strong replica (tensor parallel, and expert parallel for
MoE) × weak device × K × protocol (and the edge–cloud option when an API profile is named).

Two stages, as serving planners do (the method, the screen's measured error, what is not
modelled: docs/plan.md), one module each:

- :mod:`.space`: the configurations (:func:`configurations`) and the scenario of each;
- :mod:`.screen`: every configuration costed in milliseconds (:class:`Screen`): the exact
  twin's expected calls of each schedule, costed on each deployment (:class:`Rows`), and each
  replica a batching server whose mean decode batch solves Little's law (:class:`Pool`);
- :mod:`.screening`: the screen over every configuration at a task rate, in this process or on
  Dask, resumable (:class:`State`);
- :mod:`.recommendation`: the screen's cheapest fleets simulated at the task rate, grown until they
  meet the target (:func:`confirm`); the recommendation is the cheapest the simulator confirms
  (:func:`recommend`);
- :mod:`.deploy`: a plan as files to deploy from (front, launch commands, router configuration, README).

Prices are the device profiles' dated list prices (:func:`costsim.fleet_cost.prices`) unless
overridden per device.
"""

from .deploy import ENGINE_FLAGS, launch
from .recommendation import (ASSUMPTIONS, CONFIRM_AT_MOST, api_of, assumptions, check_protocols, confirm, point, recommend,
                             screen_against_simulator, searchable_protocols, to_json, specagent_payoff_of)
from .screen import Pool, Rows, Screen, Screened, pareto
from .screening import State, search
from .space import Config, configurations, parse_ks, scenario_of

__all__ = ["ASSUMPTIONS", "CONFIRM_AT_MOST", "assumptions", "Config", "ENGINE_FLAGS", "Pool", "Rows", "Screen", "Screened", "State",
           "api_of", "check_protocols", "configurations", "confirm", "launch", "pareto", "parse_ks", "point", "recommend",
           "scenario_of",
           "screen_against_simulator", "search", "searchable_protocols", "to_json", "specagent_payoff_of"]
