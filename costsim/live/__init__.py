"""Live mode: measure real OpenAI-compatible endpoints, calibrate the cost model, validate it.

- :mod:`.client`: HTTP client with bounded retry/backoff and one-line errors naming the URL;
- :mod:`.metrics`: Prometheus ``/metrics`` parsing (vLLM and llama.cpp metric names);
- :mod:`.plan`: measurement plans (prefill and decode sweeps, verdict- and step-shaped calls);
- :mod:`.fit`: least squares with 95% intervals, and kappa, v/d, rho derived from the fits;
- :mod:`.calibrate`: runs a plan (resumable) and writes the calibration TOML;
- :mod:`.validate`: executes a SpecAgent schedule and Strong-only against the endpoints;
- :mod:`.local`, :mod:`.gguf_model`: local llama.cpp servers with generated random models.

Heavy imports (httpx, numpy, scipy, xllamacpp, gguf) happen inside functions.
"""
