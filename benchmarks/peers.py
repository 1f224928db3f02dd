"""Optional peers: PlaidML 0.7, TVM (apache-tvm), PyTorch (CPU) and ONNX Runtime.

`benchmarks/setup_peers.sh` creates the peers venv (default
`~/.cache/stripe-bench/peers-venv`, or `$STRIPE_BENCH_PEERS_VENV`). ONNX Runtime (``ort``)
runs in the suite's own venv when onnxruntime and onnx import there (the project's ``test``
extra installs them), else in the peers venv (:func:`peer_python`). The suite never imports
a peer into its own process: it asks the peer's python whether the peer imports, and runs
the peer's part there in a subprocess.

A peer that imports is run by `benchmarks/peer_worker.py` in that venv (PlaidML 0.7: the
same Tile sources, every workload; TVM: TE + a simple tiled/vectorised/parallel schedule
per workload; PyTorch: its matmul, convolution and autograd for the matmuls, the 3x3
convolutions and their weight gradients; ONNX Runtime: each workload as a one- to
three-node ONNX model), kept loaded as a :class:`PeerServer` that the
suite times in turns with stripe. One that does not is reported as "peer X missing (run
benchmarks/setup_peers.sh)" and the suite goes on.
"""

from __future__ import annotations

import importlib.util
import json
import os
import select
import subprocess
import sys
import time
from pathlib import Path

REPLY_MARK = "@@stripe-peer@@ "  # benchmarks.peer_worker.REPLY_MARK (that module runs there)

PEERS = {
    "plaidml": "import plaidml; print(getattr(plaidml, '__version__', '?'))",
    "tvm": "import tvm; print(tvm.__version__)",
    "torch": "import torch; print(torch.__version__)",
    "ort": "import onnx, onnxruntime; print(onnxruntime.__version__)",
}

OWN_VENV_PEERS = ("ort",)
"""Peers run by the suite's own python when they import there."""


def venv_dir() -> Path:
    env = os.environ.get("STRIPE_BENCH_PEERS_VENV")
    if env:
        return Path(env)
    return Path.home() / ".cache" / "stripe-bench" / "peers-venv"


def peer_python(peer: str) -> Path:
    """The python that runs ``peer``: for ONNX Runtime the suite's own when onnxruntime and
    onnx are importable in it, else (and for every other peer) the peers venv's."""
    if peer in OWN_VENV_PEERS and all(importlib.util.find_spec(m) is not None
                                      for m in ("onnx", "onnxruntime")):
        return Path(sys.executable)
    return venv_dir() / "bin" / "python"


def detect(peers: tuple[str, ...] | None = None) -> dict[str, dict[str, str]]:
    """{peer: {"status": "missing"|"present", "version": ..., "message": ...}} for ``peers``
    (default: all of :data:`PEERS`)."""
    out: dict[str, dict[str, str]] = {}
    for name in peers or tuple(PEERS):
        probe = PEERS[name]
        py = peer_python(name)
        where = "the suite's venv" if py == Path(sys.executable) else str(venv_dir())
        if not py.exists():
            out[name] = {"status": "missing",
                         "message": f"peer {name} missing (run benchmarks/setup_peers.sh; "
                                    f"no venv at {venv_dir()})"}
            continue
        try:
            r = subprocess.run([str(py), "-c", probe], capture_output=True, text=True,
                               timeout=120)
        except (OSError, subprocess.TimeoutExpired) as e:
            out[name] = {"status": "missing",
                         "message": f"peer {name} missing (run benchmarks/setup_peers.sh): {e}"}
            continue
        if r.returncode != 0:
            last = (r.stderr.strip().splitlines() or ["?"])[-1]
            out[name] = {"status": "missing",
                         "message": f"peer {name} missing (run benchmarks/setup_peers.sh): "
                                    f"import failed in {py}: {last}"}
        else:
            out[name] = {"status": "present", "version": r.stdout.strip(), "python": str(py),
                         "message": f"peer {name} {r.stdout.strip()} present in {where}, "
                                    f"run by benchmarks/peer_worker.py in that venv"}
    return out


class PeerServer:
    """A peer kept loaded in its venv (``peer_worker --serve``), asked to build and time one
    workload at a time, so that the suite can time it in turns with stripe. A request whose
    answer does not come within ``timeout`` seconds, or a process that dies (PlaidML 0.7 can
    abort on a workload), gives None; :meth:`restart` starts a new process."""

    def __init__(self, peer: str, env: dict[str, str], root: str, timeout: float) -> None:
        self.peer, self.env, self.root, self.timeout = peer, env, root, timeout
        self.proc: subprocess.Popen | None = None
        self.hello: dict | None = None
        self.restart()

    def restart(self) -> None:
        self.close()
        py = str(peer_python(self.peer))
        try:
            self.proc = subprocess.Popen(
                [py, "-m", "benchmarks.peer_worker", "--peer", self.peer, "--serve"],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1,
                env=self.env, cwd=self.root)
        except OSError as e:
            self.proc, self.hello = None, {"error": f"{type(e).__name__}: {e}"}
            return
        self.hello = self._read() or {"error": "the peer process did not start"}

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None and "error" not in (
            self.hello or {})

    def request(self, obj: dict) -> dict | None:
        if not self.alive:
            return None
        try:
            self.proc.stdin.write(json.dumps(obj) + "\n")  # type: ignore[union-attr]
            self.proc.stdin.flush()  # type: ignore[union-attr]
        except OSError:
            return None
        return self._read()

    def _read(self) -> dict | None:
        assert self.proc is not None and self.proc.stdout is not None
        deadline = time.monotonic() + self.timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self.proc.stdout], [], [], left)[0]:
                self.close()
                return None
            line = self.proc.stdout.readline()
            if not line:  # the process died
                self.close()
                return None
            if line.startswith(REPLY_MARK):
                return json.loads(line[len(REPLY_MARK):])
            print(f"  [{self.peer}] {line.rstrip()}", flush=True)

    def close(self) -> None:
        if self.proc is None:
            return
        if self.proc.poll() is None:
            try:
                self.proc.stdin.write(json.dumps({"cmd": "quit"}) + "\n")  # type: ignore
                self.proc.stdin.flush()  # type: ignore[union-attr]
                self.proc.wait(timeout=10)
            except (OSError, subprocess.TimeoutExpired):
                self.proc.kill()
                self.proc.wait()
        self.proc = None
