"""Hardware, API and model profiles: TOML data loaded into frozen dataclasses.

:mod:`.types` (the dataclasses and their check), :mod:`.catalogue` (the shipped profiles, found
by name), :mod:`.hf_config` (a Hugging Face ``config.json``), :mod:`.deployment` (a model on
devices under an engine).

Every numeric field carries its unit in its name. Memory bandwidth ``*_gbps`` is in gigaBYTES
per second (10^9 B/s), as datasheets print it; ``*_tflops`` are dense (not 2:4-sparse) tensor
TFLOPS; ``*_gb`` are 10^9 bytes; ``*_b`` parameter counts are in billions. Each profile file
carries a ``source`` line and a ``[sources]`` table naming where each figure comes from.

Profiles ship inside the package (``costsim/data/hardware``, ``.../models``) and are found by
name (case-insensitive, with aliases) or by path: ``--strong path/to/config.json`` accepts a
Hugging Face ``config.json`` as-is.
"""

from .catalogue import load_api, load_device, load_engine, load_model, names
from .deployment import Deployment
from .hf_config import model_from_hf_config
from .types import (DTYPE_BYTES, FAMILIES, ApiEndpoint, Device, Engine, ModelSpec, ProfileError, check_dtype,
                    weight_bytes)

__all__ = ["DTYPE_BYTES", "FAMILIES", "ApiEndpoint", "Deployment", "Device", "Engine", "ModelSpec", "ProfileError",
           "check_dtype", "load_api", "load_device", "load_engine", "load_model", "model_from_hf_config", "names",
           "weight_bytes"]
