"""A model served on devices under an engine: the :class:`Deployment` every cost is of.

Apart from the types because its default engine is a shipped profile (:mod:`.catalogue`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .catalogue import load_engine
from .types import Device, Engine, ModelSpec, weight_bytes

@dataclass(frozen=True)
class Deployment:
    """A model served on ``n_devices`` identical devices under a serving ``engine``.

    Attention and dense layers are tensor-parallel over all devices. Routed experts are
    tensor-sharded too, or with ``expert_parallel`` placed whole on the devices and reached by
    an all-to-all dispatch and combine. ``weight_dtype`` sets bytes per parameter and the
    tensor-core rate; ``expert_dtype`` the routed experts' (empty: the model's own, else
    ``weight_dtype``); ``kv_dtype`` the KV cache's.
    """

    model: ModelSpec
    device: Device
    n_devices: int = 1
    weight_dtype: str = "bf16"
    kv_dtype: str = "bf16"
    engine: Engine = field(default_factory=lambda: load_engine())
    expert_parallel: bool = False
    expert_dtype: str = ""

    @property
    def expert_precision(self) -> str:
        return self.expert_dtype or self.model.expert_dtype or self.weight_dtype

    @property
    def weight_bytes(self) -> float:
        return weight_bytes(self.model, self.weight_dtype, self.expert_dtype)

    @property
    def memory_bytes(self) -> float:
        return self.device.memory_bytes * self.n_devices

    @property
    def token_budget(self) -> int:
        """The engine's token budget of one iteration on this device (``max_batched_tokens``)."""
        return int(self.engine.setting("max_batched_tokens", self.device))

    @property
    def max_seqs(self) -> int:
        """The most sequences the engine runs at once on this device (``max_seqs``)."""
        return int(self.engine.setting("max_seqs", self.device))

    def describe(self) -> str:
        exp = f", {self.expert_precision} experts" if self.model.is_moe and self.expert_precision != self.weight_dtype else ""
        ep = ", expert-parallel" if self.expert_parallel else ""
        return (f"{self.model.display_name} on {self.n_devices}x {self.device.display_name}, "
                f"{self.weight_dtype} weights{exp}{ep}, {self.engine.display_name}")


def ideal(params_b: float) -> Deployment:
    """The paper's pass counting as a deployment: a dense model of ``params_b`` billion BF16
    parameters without a KV cache, on a memory-bound device whose compute is free, under the
    engine without fixed latencies (``ideal``): every iteration is one pass over the weights,
    ``params_b`` seconds. What the tests and the docs' "paper's regime" runs use."""
    device = Device(name="ideal", display_name="ideal memory-bound device", memory_gb=1e6,
                    hbm_bandwidth_gb_per_s=2.0, bf16_dense_tflops=1e12, source="the paper's pass counting")
    model = ModelSpec(name="m", display_name="m", num_layers=1, hidden_size=1, num_attention_heads=1, num_kv_heads=0,
                      head_dim=1, total_params_b=params_b, active_params_b=params_b, source="the paper's pass counting")
    return Deployment(model, device, 1, "bf16", engine=load_engine("ideal"))
