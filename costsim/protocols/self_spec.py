"""Tool-call self-speculation ("Speculate While You Reason"), alone and inside SpecAgent.

The agent model predicts its own next tool call from a fixed speculation suffix while it is
still reasoning; a correct prediction of a read-only call lets the call run in parallel and
hides its latency. Assumptions, each a knob:

- **The speculation call.** Each time the speculating model is called for a step, a second
  request to the same replica starts with it: it reuses the prefix KV cache (context = the
  step's whole context), prefills the ``spec_suffix_tokens`` of the suffix and decodes the
  predicted call, ``spec_call_tokens`` (at most the step's own tokens). Its cost is the extra
  decode the paper's design pays: its tokens, bytes, FLOPs and time are in the model's counters,
  but it is counted in ``spec_calls``, not as a model call (it forks the step's request).
- **Hits.** If the step turns out to be a read-only call, the prediction is exactly right with
  probability ``self_spec_hit_rate`` (Hit@1: name and arguments; 0.61-0.66 reported after joint
  agent-speculator training). A hit starts the tool when the prediction is out, so the result
  is ready ``latency`` after that instead of after the step's call ends (``tool_s_saved``); a miss
  executes the real call as usual (the speculated one is wasted, ``spec_wasted_tools``). A
  prediction not out before the step's call ends saves nothing. State-changing calls are never
  speculated.

``self-spec`` is Strong-only with the strong agent speculating its own reads.
``specagent-self-spec`` is SpecAgent with the weak drafter speculating the reads it drafts (they
run at once in SpecAgent, so a hit hides their latency during drafting); reviews and repairs are
unchanged.
"""

from __future__ import annotations

from ..config import SelfSpecOptions as O, StepScales
from . import specagent, strong_only
from ._rng import side_rng
from .schedule import Wrapper


class SpeculatingRun(Wrapper):
    """A :class:`~costsim.sim.agent.TaskRun` seen by a protocol, with ``model``'s calls
    speculating their tool call. Everything else is the wrapped task run's."""

    def __init__(self, tr, model, hit_rate, suffix_tokens, call_tokens):
        super().__init__(tr)
        self._model, self._hit = model, float(hit_rate)
        self._suffix, self._tokens = int(suffix_tokens), int(call_tokens)
        self._spec = None   # {"at": time the prediction was out} for the last call, if any
        self._bg = []
        self._rng = side_rng(tr.rng, 2)  # hits; tool latencies stay on the task's stream

    def call(self, who, prefill, context, decode):
        tr = self._tr
        if who != self._model:
            self._spec = None
            return (yield from tr.call(who, prefill, context, decode))
        spec = {"at": None}

        def predict():
            yield from tr.call(who, self._suffix, context + prefill, min(self._tokens, decode))
            tr.row[f"{who}_calls"] -= 1  # a fork of the step's request, counted in spec_calls
            spec["at"] = tr.env.now

        self._bg.append(tr.env.process(predict()))
        tr.row["spec_calls"] += 1
        req = yield from tr.call(who, prefill, context, decode)
        self._spec = spec
        return req

    def execute(self, step):
        tr = self._tr
        spec, self._spec = self._spec, None
        if spec is None or step.kind != "read":
            return (yield from tr.execute(step))
        if spec["at"] is None or not (self._hit >= 1.0 or (self._hit > 0 and self._rng.random() < self._hit)):
            tr.row["spec_wasted_tools"] += 1
            return (yield from tr.execute(step))
        lat = tr.tool_seconds(step)
        wait = max(spec["at"] + lat - tr.env.now, 0.0)
        tr.row["spec_hits"] += 1
        tr.row["tool_s"] += lat
        tr.row["tool_s_saved"] += lat - wait
        if wait:
            yield tr.env.timeout(wait)

    def join(self):
        """Wait for predictions still decoding (their cost belongs to this task)."""
        for p in self._bg:
            if not p.triggered:
                yield p


def run(tr, task, self_spec_hit_rate: float = O.self_spec_hit_rate, spec_suffix_tokens: int = O.spec_suffix_tokens,
        spec_call_tokens: int = O.spec_call_tokens, strong_step_scale: float = StepScales.strong_step_scale):
    """Strong-only, the strong agent speculating its own read-only calls."""
    sr = SpeculatingRun(tr, "strong", self_spec_hit_rate, spec_suffix_tokens, spec_call_tokens)
    yield from sr.drive(strong_only.schedule(task, strong_step_scale))
    yield from sr.join()


def run_specagent(tr, task, self_spec_hit_rate: float = O.self_spec_hit_rate,
                  spec_suffix_tokens: int = O.spec_suffix_tokens, spec_call_tokens: int = O.spec_call_tokens,
                  **options):
    """SpecAgent, the weak drafter speculating the read-only calls it drafts."""
    sr = SpeculatingRun(tr, "weak", self_spec_hit_rate, spec_suffix_tokens, spec_call_tokens)
    yield from sr.drive(specagent.schedule(task, **options))
    yield from sr.join()


run_specagent.__wrapped_run__ = specagent.run  # protocols.get() passes it SpecAgent's options too
