"""Optional peers: PlaidML 0.7 and TVM (apache-tvm), in their own venv.

`benchmarks/setup_peers.sh` creates the venv (default `~/.cache/stripe-bench/peers-venv`,
or `$STRIPE_BENCH_PEERS_VENV`). The suite never imports a peer into its own process: it
asks the venv's python whether the peer imports, and would run the peer's part there in a
subprocess.

A peer that imports is run by `benchmarks/peer_worker.py` in that venv (PlaidML 0.7: the
same Tile sources, every workload; TVM: TE + a simple tiled/vectorised/parallel schedule
per workload). One that does not is reported as "peer X missing (run
benchmarks/setup_peers.sh)" and the suite goes on.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

PEERS = {
    "plaidml": "import plaidml; print(getattr(plaidml, '__version__', '?'))",
    "tvm": "import tvm; print(tvm.__version__)",
}


def venv_dir() -> Path:
    env = os.environ.get("STRIPE_BENCH_PEERS_VENV")
    if env:
        return Path(env)
    return Path.home() / ".cache" / "stripe-bench" / "peers-venv"


def detect() -> dict[str, dict[str, str]]:
    """{peer: {"status": "missing"|"present", "version": ..., "message": ...}}."""
    py = venv_dir() / "bin" / "python"
    out: dict[str, dict[str, str]] = {}
    for name, probe in PEERS.items():
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
            out[name] = {"status": "present", "version": r.stdout.strip(),
                         "message": f"peer {name} {r.stdout.strip()} present in {venv_dir()}, "
                                    f"run by benchmarks/peer_worker.py in that venv"}
    return out
