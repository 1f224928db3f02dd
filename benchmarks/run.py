"""The benchmark suite: stripe against numpy (and, when present, PlaidML, TVM, PyTorch and
ONNX Runtime).

    python -m benchmarks.run                 # every workload, 1 and 2 threads
    python -m benchmarks.run --quick         # a short smoke run (a few workloads, 3 repeats)
    python -m benchmarks.run --workloads matmul_1024,conv_56x56x64 --threads 1 --out DIR

Run from the repository root with the project's venv. What it does, per thread count T
(each in a fresh subprocess with OMP_NUM_THREADS=T and OPENBLAS_NUM_THREADS=T, and with
OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE removed unless --keep-openblas-env):

1. per workload: computes the numpy composition (the reference), compiles the Tile source
   for each stripe target, runs it once and checks it against the reference
   (allclose, rtol per workload, atol = atol_rel * max|reference|) before any timing; a
   system whose result is wrong is reported as FAILED and not timed;
2. warm-up, then `repeats` rounds, each round calling every system once in a rotating order
   (interleaved); the median, min and all samples are recorded. stripe writes into output
   arrays allocated once (`Program.run(inputs, out=...)`), as PlaidML and TVM write into
   their preallocated tensors; the numpy composition allocates its result and temporaries
   on every call, as numpy code does.

Compile time is measured separately, in two subprocesses sharing one fresh cache directory:
the first compiles every (workload, target) cold (C compiler run), the second, a new
process, compiles them again warm (cache hit: lowering + passes + verifier + emit + load).

Output in --out (default benchmarks/results/): results.json, results.md, and PNG plots when
matplotlib can be imported (it is not a project dependency).
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

if __package__ in (None, ""):            # `python benchmarks/run.py`
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    __package__ = "benchmarks"

from benchmarks import peers as _peers  # noqa: E402
from benchmarks.peak import measure_fma_peak  # noqa: E402
from benchmarks.timing import warm  # noqa: E402
from benchmarks.workloads import QUICK, Workload, all_workloads, by_name  # noqa: E402

ZEN3_PEAK_PER_CORE = 97.0  # GFLOP/s float32 FMA peak of one Zen 3 core, when none is measured
TARGETS = {"stripe_avx2": "cpu_avx2", "stripe_avx512": "cpu_avx512", "stripe_none": "none"}
SYSTEMS = ["numpy", "stripe_avx2", "stripe_avx512", "stripe_none"]
OPENBLAS_ENV = ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")


# --------------------------------------------------------------------------- worker side

def _openblas_info() -> dict[str, str]:
    """Which OpenBLAS kernel numpy runs: threadpoolctl if installed, else ctypes."""
    info: dict[str, str] = {}
    try:
        import threadpoolctl  # type: ignore[import-not-found]
        for lib in threadpoolctl.threadpool_info():
            if lib.get("internal_api") == "openblas":
                info.update(corename=str(lib.get("architecture")),
                            version=str(lib.get("version")),
                            num_threads=str(lib.get("num_threads")), via="threadpoolctl")
                return info
    except ImportError:
        pass
    import ctypes
    import glob

    import numpy as np
    libs = glob.glob(os.path.join(os.path.dirname(np.__file__), os.pardir, "numpy.libs",
                                  "libscipy_openblas*"))
    for path in libs:
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        for prefix in ("scipy_openblas_", "openblas_"):
            for suffix in ("64_", ""):
                try:
                    core = getattr(lib, f"{prefix}get_corename{suffix}")
                    conf = getattr(lib, f"{prefix}get_config{suffix}")
                    nthr = getattr(lib, f"{prefix}get_num_threads{suffix}")
                except AttributeError:
                    continue
                core.restype = conf.restype = ctypes.c_char_p
                info.update(corename=core().decode(), config=conf().decode(),
                            num_threads=str(nthr()), via="ctypes " + os.path.basename(path))
                return info
    info["corename"] = "unknown (no OpenBLAS found in numpy.libs)"
    return info


def _check(out, ref, w: Workload) -> tuple[bool, str]:  # type: ignore[no-untyped-def]
    import numpy as np
    if out.shape != ref.shape:
        return False, f"shape {out.shape} != {ref.shape}"
    atol = w.atol_rel * float(np.abs(ref).max() or 1.0)
    ok = bool(np.allclose(out, ref, rtol=w.rtol, atol=atol))
    err = float(np.abs(out.astype(np.float64) - ref).max()) if out.size else 0.0
    return ok, f"max abs err {err:.3g} (rtol {w.rtol:g}, atol {atol:.3g})"


def _pin_to_cpus(threads: int) -> list[int]:
    """Restricts this process (and the peer servers it starts, which inherit it) to the
    first `threads` CPUs it may use. Thread-count variables alone do not bound every
    system: PlaidML 0.7 sizes its pool from the machine and ignores OMP_NUM_THREADS (its
    "1-thread" convolutions measured 1.75-1.87 CPU-seconds per second unpinned, 0.94-1.00
    pinned), so a 1-thread comparison needs the CPUs themselves limited."""
    allowed = sorted(os.sched_getaffinity(0))
    if 0 < threads < len(allowed):
        os.sched_setaffinity(0, allowed[:threads])
    return sorted(os.sched_getaffinity(0))


def _placed(arrays: dict, alignment: str) -> dict:
    """The arrays where `--alignment` puts them: on a 64-byte boundary (copies made by
    stripe.arrays.aligned, for every system alike), or where numpy put them ('numpy': 16
    bytes past a boundary for a large array)."""
    if alignment == "numpy":
        return arrays
    import stripe

    return {k: stripe.arrays.aligned(a) for k, a in arrays.items()}


def worker_run(args: argparse.Namespace) -> dict:
    import numpy as np

    import stripe

    threads = int(os.environ.get("OMP_NUM_THREADS", "1"))
    cpus = _pin_to_cpus(threads) if not args.no_pin else sorted(os.sched_getaffinity(0))
    # '% peak' is of the FMA peak measured here, on these CPUs, unless --peak gives one
    measured = measure_fma_peak(threads)
    if args.peak:
        peak, peak_source = args.peak * threads, f"--peak {args.peak:g} per core"
    elif measured:
        peak, peak_source = measured, "measured"
    else:
        peak, peak_source = (ZEN3_PEAK_PER_CORE * threads,
                             "a Zen 3 core's figure (the FMA loop could not run here)")
    print(f"  [{threads}T] FMA peak: {measured and f'{measured:.1f}'} GFLOP/s measured; "
          f"'% peak' uses {peak:.1f} ({peak_source})", flush=True)
    systems = [s for s in args.systems.split(",") if s]
    if threads > 1 and "stripe_none" in systems and not args.none_all_threads:
        systems.remove("stripe_none")          # no passes = no `threads` tag: 1 thread anyway
    # After a call, OpenBLAS's worker threads keep spinning for about 0.1 s; a 2-thread
    # system timed right after numpy then shares its cores with them and runs much slower.
    settle = args.settle if threads > 1 else 0.0
    root = str(Path(__file__).resolve().parent.parent)
    peer_env = dict(os.environ, PYTHONPATH=root, TVM_NUM_THREADS=str(threads),
                    STRIPE_PEER_THREADS=str(threads))
    servers = {p: _peers.PeerServer(p, peer_env, root, args.peer_timeout)
               for p in args.with_peers.split(",") if p}
    peers_out: dict = {}
    for p, srv in servers.items():
        hello = srv.hello or {}
        peers_out[p] = ({"error": hello["error"]} if "error" in hello else
                        {"peer": p, "threads": threads, "info": hello.get("info"),
                         "workloads": {}})
        if "error" in hello:
            print(f"  [{p}] not measured: {hello['error']}", flush=True)
    servers = {p: srv for p, srv in servers.items() if "error" not in peers_out[p]}
    result: dict = {"threads": threads, "openblas": _openblas_info(), "settle_s": settle,
                    "loadavg_before": os.getloadavg(), "cpus": cpus,
                    "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY"),
                    "fma_peak_measured_gflops": measured, "peak_gflops": peak,
                    "peak_source": peak_source, "alignment": args.alignment,
                    "input_offsets": {},  # workload -> input -> bytes past a 64-byte boundary
                    "systems": systems, "workloads": {}}
    for name in args.workloads.split(","):
        w = by_name()[name]
        x = _placed(w.inputs(), args.alignment)
        result["input_offsets"][name] = {k: a.ctypes.data % 64 for k, a in x.items()}
        entry: dict = {}
        fns = {}
        t0 = time.perf_counter()
        ref = w.numpy_fn(**x)
        first = {"numpy": time.perf_counter() - t0}
        fns["numpy"] = lambda w=w, x=x: w.numpy_fn(**x)
        entry["numpy"] = {"check": "reference"}
        for sysname in systems:
            if sysname == "numpy":
                continue
            try:
                prog = stripe.compile(w.source, w.input_types(), target=TARGETS[sysname])
                t0 = time.perf_counter()
                out = prog(**x)[w.output]
                first[sysname] = time.perf_counter() - t0
            except Exception as e:  # noqa: BLE001 - report and go on
                entry[sysname] = {"check": "FAILED", "error": f"{type(e).__name__}: {e}"}
                continue
            ok, msg = _check(out, ref, w)
            entry[sysname] = {"check": ("ok " if ok else "FAILED ") + msg}
            if ok:
                # outputs preallocated once and written in place, as the peers' are (a fresh
                # 16 MiB output costs 4096 page faults per call)
                outs = _placed({n: np.empty_like(a) for n, a in prog(**x).items()},
                               args.alignment)
                fns[sysname] = lambda prog=prog, x=x, outs=outs: prog.run(x, out=outs)
        # repeats: at most args.repeats, at least 3, within the per-workload time budget
        per_round = sum(first[s] for s in fns)
        repeats = max(3, min(args.repeats, int(args.budget / max(per_round, 1e-9))))
        warmup = 0 if per_round > 1.0 else args.warmup   # the check call was one warm-up
        order = list(fns)
        for _ in range(warmup):
            for s in order:
                fns[s]()
        _pause(settle, servers)
        samples: dict[str, list[float]] = {s: [] for s in order}
        last = None
        for r in range(repeats):
            rot = order[r % len(order):] + order[:r % len(order)]
            for s in rot:
                if settle and s != last:
                    # With T > 1 each system's threads spin for a while after its calls
                    # (OpenBLAS's for about 0.1 s, OpenMP's for GOMP_SPINCOUNT), so the
                    # next system waits until they are idle, then runs once untimed
                    # (after the pause its caches and clocks are cold).
                    _pause(settle, servers)
                    warm(fns[s], args.warm_s)
                last = s
                t0 = time.perf_counter()
                fns[s]()
                samples[s].append(time.perf_counter() - t0)
        for s in order:
            med = statistics.median(samples[s])
            entry[s].update(median_s=med, min_s=min(samples[s]), samples_s=samples[s],
                            repeats=repeats, warmup=warmup,
                            gflops=w.flops / med / 1e9,
                            pct_peak=100.0 * w.flops / med / 1e9 / peak)
        if servers:
            _pause(settle, servers)
            _time_with_peers(name, w, order, fns, entry, servers, peers_out, repeats, args,
                             threads)
        result["workloads"][name] = entry
        print(f"  [{threads}T] {name}: " + ", ".join(
            f"{s} {entry[s]['median_s'] * 1e3:.2f} ms" if "median_s" in entry[s]
            else f"{s} {entry[s]['check']}" for s in entry), flush=True)
    for srv in servers.values():
        srv.close()
    result["peers"] = peers_out
    result["loadavg_after"] = os.getloadavg()
    if _QUIET_WAITS:  # how long the pauses waited, past --settle, for spinning threads
        result["quiet_wait_s"] = {"pauses": len(_QUIET_WAITS), "max": max(_QUIET_WAITS),
                                  "total": sum(_QUIET_WAITS),
                                  "over_50ms": sum(w > 0.05 for w in _QUIET_WAITS)}
    return result


_QUIET_WAITS: list[float] = []  # extra seconds each pause waited for quiet (results.json)


def _process_cpu_s(pid: int) -> float:
    """CPU seconds used so far by every thread of process ``pid`` (0 if it is gone)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _pause(settle: float, servers: dict | None = None, max_extra: float = 1.0) -> None:
    """Sleep ``settle`` seconds, then on until neither this process's other threads nor the
    peer processes use the CPUs (under 10% of a core over 20 ms; at most ``max_extra``
    seconds more). Idle threads spin for a while after their calls -- OpenBLAS's about
    0.1 s, TVM's pool about 0.2 s (measured: a full core for 0.15-0.2 s after a batch of
    2-thread convolutions) -- and the next system timed must not share the cores with
    them."""
    if settle <= 0:
        return
    time.sleep(settle)
    pids = [os.getpid()] + [srv.proc.pid for srv in (servers or {}).values()
                            if getattr(srv, "proc", None) is not None]
    if not os.path.exists(f"/proc/{pids[0]}/stat"):
        return  # no /proc: the pause alone
    start = time.perf_counter()
    while time.perf_counter() - start < max_extra:
        before = [_process_cpu_s(p) for p in pids]
        t0 = time.perf_counter()
        time.sleep(0.02)
        used = sum(_process_cpu_s(p) for p in pids) - sum(before)
        if used < 0.1 * (time.perf_counter() - t0) + 1e-9:
            break
    _QUIET_WAITS.append(time.perf_counter() - start)


def _time_with_peers(name: str, w: Workload, order: list[str], fns: dict, entry: dict,
                     servers: dict, peers_out: dict, repeats: int, args: argparse.Namespace,
                     threads: int) -> None:
    """Time the stripe systems back to back (warm caches, as a peer in its own process
    runs) in turns with the peers: a few rounds, each with a short batch of every stripe
    system and then of every peer, so that a change in the machine's speed (a shared VM's
    neighbours) falls on all of them alike."""
    first: dict[str, float] = {}
    for p, srv in servers.items():
        rep = srv.request({"cmd": "prepare", "workload": name})
        if rep is None:
            peers_out[p]["workloads"][name] = {"check": "FAILED: peer process died or "
                                               "timed out"}
            print(f"  [{p} {threads}T] {name}: peer process died or timed out; going on",
                  flush=True)
            srv.restart()
            continue
        peers_out[p]["workloads"][name] = {"check": rep["check"],
                                           "compile_s": rep.get("compile_s")}
        if rep["check"].startswith("ok"):
            first[p] = rep["first_s"]
        else:
            print(f"  [{p} {threads}T] {name}: {rep['check']}", flush=True)
    rounds = max(1, min(args.peer_rounds, repeats))
    per = math.ceil(repeats / rounds)
    solo: dict[str, list[float]] = {s: [] for s in order if s != "numpy"}
    peer_samples: dict[str, list[float]] = {p: [] for p in first}
    # each system's samples per round, for the paired comparison (see _paired)
    by_round: dict[str, list[list[float]]] = {s: [] for s in list(solo) + list(first)}

    cpu_s: dict[str, float] = {s: 0.0 for s in list(solo) + list(peer_samples)}

    def stripe_batch(s: str) -> None:
        warm(fns[s], args.warm_s)  # untimed, as a peer's batch starts ("warm")
        c0 = time.process_time()
        mine = []
        for _ in range(per):
            t0 = time.perf_counter()
            fns[s]()
            mine.append(time.perf_counter() - t0)
        cpu_s[s] += time.process_time() - c0
        solo[s] += mine
        by_round[s].append(mine)

    def peer_batch(p: str) -> None:
        if p not in peer_samples:
            return  # died in an earlier round
        if len(peer_samples[p]) >= 3 and sum(peer_samples[p]) > args.budget:
            return  # a slow peer (PlaidML's 2048x2048x347 matmul: 5 s a call)
        n = max(1, min(per, int(args.budget / rounds / max(first[p], 1e-9))))
        rep = servers[p].request({"cmd": "time", "workload": name, "n": n,
                                  "warm": first[p] < 1.0, "warm_s": args.warm_s})
        if rep is None:
            peers_out[p]["workloads"][name]["check"] = "FAILED: peer process died"
            del peer_samples[p]
            servers[p].restart()
            return
        peer_samples[p] += rep["samples_s"]
        by_round[p].append(rep["samples_s"])
        cpu_s[p] += rep.get("cpu_s", float("nan"))

    # Every batch starts after the same pause (a peer's worker threads may spin on after
    # its calls -- PlaidML's pool is not bound by OMP_NUM_THREADS -- and on a shared VM the
    # first calls after any pause run slower), and the batches take turns going first, so
    # that neither side always runs right after the other's warm-up.
    batches = ([(stripe_batch, s) for s in solo] + [(peer_batch, p) for p in list(first)])
    for r in range(rounds):
        k = r % len(batches)
        for run_batch, who in batches[k:] + batches[:k]:
            _pause(args.settle, servers)
            run_batch(who)
        for who in by_round:  # a peer that skipped this round (over budget, or died)
            if len(by_round[who]) <= r:
                by_round[who].append([])
    # CPU-seconds per second over the timed calls: how many cores a system really kept
    # busy (at most `threads` when pinned; see _pin_to_cpus)
    for s, xs in solo.items():
        entry[s].update(solo_median_s=statistics.median(xs), solo_samples_s=xs,
                        cpu_per_wall=_cores(cpu_s[s], sum(xs)))
    for p, xs in peer_samples.items():
        med = statistics.median(xs)
        peers_out[p]["workloads"][name].update(
            median_s=med, min_s=min(xs), samples_s=xs, repeats=len(xs),
            gflops=w.flops / med / 1e9, cpu_per_wall=_cores(cpu_s[p], sum(xs)),
            paired={s: _paired(by_round[p], by_round[s]) for s in solo})
        print(f"  [{p} {threads}T] {name}: {med * 1e3:.2f} ms", flush=True)


MIN_CORES_WALL_S = 0.02
"""Timed calls shorter than this in total get no ``cpu_per_wall``: the process's CPU clock
moves in steps on some VMs, too coarse for a few calls of microseconds (they can come out
at more cores than the process may use)."""


def _cores(cpu_s: float, wall_s: float) -> float | None:
    """CPU-seconds per second over ``wall_s`` seconds of timed calls (see MIN_CORES_WALL_S)."""
    if wall_s < MIN_CORES_WALL_S or not math.isfinite(cpu_s):
        return None
    return round(cpu_s / wall_s, 3)


def _paired(peer: list[list[float]], mine: list[list[float]]) -> dict:
    """peer time / stripe time round by round (the median of each one's calls in a round),
    and the median of those ratios. The two batches of a round run within a second of each
    other, so a change of the machine's speed that lasts seconds (on a shared VM: a vCPU
    not running, or its host core shared) falls on both of them, where the medians over
    all rounds can each pick up different ones."""
    ratios = [statistics.median(a) / statistics.median(b)
              for a, b in zip(peer, mine) if a and b]
    return {"ratio": statistics.median(ratios) if ratios else None,
            "rounds": [round(x, 4) for x in ratios]}


def worker_compile(args: argparse.Namespace) -> dict:
    import stripe
    # one throwaway compile so that one-time imports and isl start-up are not charged to
    # the first workload
    stripe.compile("function (A[N]) -> (O) { O = A + 1.0; }", {"A": ((3,), "float32")},
                   target="cpu_avx2")
    res: dict = {}
    for name in args.workloads.split(","):
        w = by_name()[name]
        res[name] = {}
        for sysname, target in TARGETS.items():
            if sysname not in args.systems.split(","):
                continue
            t0 = time.perf_counter()
            try:
                stripe.compile(w.source, w.input_types(), target=target)
                res[name][sysname] = time.perf_counter() - t0
            except Exception as e:  # noqa: BLE001
                res[name][sysname] = f"{type(e).__name__}: {e}"
        print(f"  [{args.worker}] {name}: " + ", ".join(
            f"{k} {v * 1e3:.0f} ms" if isinstance(v, float) else f"{k} {v}"
            for k, v in res[name].items()), flush=True)
    return res


# --------------------------------------------------------------------------- driver side

def _run_worker(mode: str, args: argparse.Namespace, env: dict[str, str],
                workloads: list[str]) -> dict:
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as f:
        out = f.name
    cmd = [sys.executable, "-m", "benchmarks.run", "--worker", mode, "--worker-out", out,
           "--workloads", ",".join(workloads), "--systems", args.systems,
           "--repeats", str(args.repeats), "--warmup", str(args.warmup),
           "--budget", str(args.budget), "--settle", str(args.settle), "--warm-s", str(args.warm_s),
           "--alignment", args.alignment]
    if args.none_all_threads:
        cmd.append("--none-all-threads")
    if args.no_pin:
        cmd.append("--no-pin")
    if mode == "run" and getattr(args, "with_peers", ""):
        cmd += ["--with-peers", args.with_peers, "--peer-timeout", str(args.peer_timeout)]
    root = str(Path(__file__).resolve().parent.parent)
    env = dict(env, PYTHONPATH=root + os.pathsep + env.get("PYTHONPATH", ""))
    r = subprocess.run(cmd, env=env, cwd=root)
    try:
        if r.returncode != 0:
            raise SystemExit(f"benchmark worker {mode} failed with exit code {r.returncode}")
        return json.loads(Path(out).read_text())
    finally:
        os.unlink(out)


def _machine() -> dict:
    info = {"platform": platform.platform(), "python": platform.python_version(),
            "nproc": os.cpu_count()}
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                info["cpu"] = line.split(":", 1)[1].strip()
            if line.startswith("flags"):
                fl = set(line.split(":", 1)[1].split())
                info["simd"] = " ".join(f for f in ("sse4_2", "avx", "avx2", "fma", "avx512f")
                                        if f in fl)
                break
    except OSError:
        pass
    try:
        cc = os.environ.get("CC", "cc")
        info["cc"] = subprocess.run([cc, "--version"], capture_output=True,
                                    text=True).stdout.splitlines()[0]
    except (OSError, IndexError):
        info["cc"] = "?"
    import numpy as np
    info["numpy"] = np.__version__
    info["openblas_env_inherited"] = {k: os.environ.get(k) for k in OPENBLAS_ENV}
    return info


def _fmt_ms(e: dict) -> str:
    if "median_s" in e:
        return f"{e['median_s'] * 1e3:.2f}"
    return e.get("check", "-").split(" ")[0] if e else "-"


def _peer_table(run: dict) -> list[str]:
    peers = run.get("peers") or {}
    if not peers:
        return []
    lines = [f"Peers, {run['threads']} thread(s), each kept loaded in its own process and "
             "timed in turns with stripe (rounds of a few calls of each, back to back: warm "
             "caches); X/peer = peer time / X time, both from those rounds (X's time "
             "interleaved with numpy is in the table above); `paired` = the median over "
             "the rounds of that ratio within each round (the two batches of a round run "
             "within a second of each other, so a slow spell of a shared machine falls on "
             "both). ONNX Runtime (`ort`) runs each workload as a one- to three-node ONNX "
             "model in ONNX's layout (NCHW convolutions), a layer's weights as initializers "
             "(pre-packed once when the session is made), through an I/O binding. "
             "TVM compiles for AVX2 "
             "(`-mcpu=haswell`); PlaidML's LLVM CPU device picks its own instruction set "
             "and thread count, so the run is pinned to CPUs "
             f"{run.get('cpus', '(not recorded)')}; `cores` = CPU-seconds per second over "
             "the timed calls (all threads of the process; - when they took under 20 ms in all, "
             "too short for the CPU clock).", ""]
    for peer, pr in peers.items():
        if "error" in pr:
            lines += [f"- {peer}: not measured: {pr['error']}", ""]
    names = list(run["workloads"])
    ok_peers = [p for p, pr in peers.items() if "error" not in pr]
    if not ok_peers:
        return lines
    mine = [s for s in ("stripe_avx2", "stripe_avx512")
            if any(s in run["workloads"][n] for n in names)]

    def solo(n: str, s: str) -> float | None:
        st = run["workloads"][n].get(s, {})
        return st.get("solo_median_s", st.get("median_s"))

    def cores(e: dict) -> str:
        c = e.get("cpu_per_wall")
        return f"{c:.2f}" if isinstance(c, (int, float)) and math.isfinite(c) else "-"

    hdr = ["workload"] + [h for s in mine for h in (f"{s} solo ms", f"{s} cores")]
    for p in ok_peers:
        hdr += [f"{p} ms", f"{p} GFLOP/s", f"{p} cores", f"{p} check"] + [
            f"{s}/{p}" for s in mine] + [f"{s}/{p} paired" for s in mine]
    lines += ["| " + " | ".join(hdr) + " |", "|" + "---|" * len(hdr)]
    for n in names:
        row = [n] + [c for s in mine for c in (
            f"{solo(n, s) * 1e3:.2f}" if solo(n, s) else "-",
            cores(run["workloads"][n].get(s, {})))]
        for p in ok_peers:
            e = peers[p]["workloads"].get(n, {})
            row += [f"{e['median_s'] * 1e3:.2f}" if "median_s" in e else "-",
                    f"{e['gflops']:.2f}" if "gflops" in e else "-", cores(e),
                    str(e.get("check", "-")).replace("|", "/")[:60]]
            row += [f"{e['median_s'] / solo(n, s):.3f}" if "median_s" in e and solo(n, s)
                    else "-" for s in mine]
            paired = e.get("paired", {})
            row += [f"{paired[s]['ratio']:.3f}" if (paired.get(s) or {}).get("ratio")
                    else "-" for s in mine]
        lines.append("| " + " | ".join(row) + " |")
    return lines + [""]


def _quiet(q: dict | None) -> str:
    if not q:
        return ""
    return (f", then on until no other thread used the CPUs ({q['over_50ms']} of "
            f"{q['pauses']} pauses waited over 50 ms more, at most {q['max'] * 1e3:.0f} ms)")


def _load(la: list[float] | None) -> str:
    return "?" if not la else f"{la[0]:.2f}"


def _peak(run: dict) -> str:
    measured = run.get("fma_peak_measured_gflops")
    text = f"{measured:.1f} GFLOP/s measured" if measured else "not measured"
    if "peak_gflops" in run:
        text += f"; '% peak' is of {run['peak_gflops']:.1f} ({run['peak_source']})"
    return text


def _alignment_note(res: dict) -> str:
    runs = res.get("runs", [])
    alignment = runs[0].get("alignment", "numpy") if runs else "64"
    if alignment == "numpy":
        return ("Inputs and stripe's `out=` arrays: where numpy allocated them "
                "(`--alignment numpy`: on 16-byte boundaries, large ones typically 16 "
                "bytes past a 64-byte one).")
    return ("Inputs (the same arrays for numpy and stripe) and stripe's `out=` arrays start "
            "on a 64-byte boundary (`stripe.arrays`), as the peers' own buffers do; "
            "`--alignment numpy` keeps numpy's placement instead.")


def markdown(res: dict) -> str:
    m = res["machine"]
    lines = [f"# stripe benchmark results ({res['date']})", "",
             f"Machine: {m.get('cpu', '?')}, {m.get('nproc')} logical CPUs, SIMD: "
             f"{m.get('simd', '?')}; {m.get('cc')}; Python {m.get('python')}, numpy "
             f"{m.get('numpy')}.", "",
             "'% peak' is of the float32 FMA peak of the CPUs the run used, measured at the "
             "start of each thread count's run (benchmarks/peak.py: 12 chains of 8-lane FMAs "
             "per thread, AVX2, best of 7), unless `--peak` gave one (a Zen 3 core: "
             f"{ZEN3_PEAK_PER_CORE:g} GFLOP/s).", "",
             "Ratio = numpy time / stripe time (above 1: stripe is faster). Times are the "
             "median of the repeats after warm-up; every result was checked against numpy "
             "before it was timed.", "",
             _alignment_note(res), ""]
    for run in res["runs"]:
        t = run["threads"]
        ob = run["openblas"]
        lines += [f"## {t} thread{'s' if t > 1 else ''}", "",
                  f"numpy's OpenBLAS kernel: **{ob.get('corename')}** "
                  f"({ob.get('num_threads')} threads, via {ob.get('via')}); "
                  f"OPENBLAS_CORETYPE/OPENBLAS_L2_SIZE: {run['openblas_env']}; "
                  f"OMP_WAIT_POLICY={run.get('omp_wait_policy')}; "
                  "pause before each change of system: "
                  f"{run.get('settle_s', 0)} s{_quiet(run.get('quiet_wait_s'))}; "
                  "load average before/after "
                  f"the run: {_load(run.get('loadavg_before'))} / "
                  f"{_load(run.get('loadavg_after'))} (above ~0.1 means another process "
                  f"was using the CPUs).", "",
                  f"FMA peak on {t} core{'s' if t > 1 else ''}: {_peak(run)}.", ""]
        systems = [s for s in SYSTEMS if s in run["systems"]]
        hdr = ["workload", "GFLOP"]
        for s in systems:
            hdr += [f"{s} ms", f"{s} GFLOP/s", f"{s} % peak"]
        hdr += [f"{s}/numpy" for s in systems if s != "numpy"]
        lines += ["| " + " | ".join(hdr) + " |", "|" + "---|" * len(hdr)]
        for name, entry in run["workloads"].items():
            w = by_name()[name]
            row = [name, f"{w.flops / 1e9:.3g}"]
            for s in systems:
                e = entry.get(s, {})
                row += [_fmt_ms(e),
                        f"{e['gflops']:.2f}" if "gflops" in e else "-",
                        f"{e['pct_peak']:.1f}" if "pct_peak" in e else "-"]
            for s in systems:
                if s == "numpy":
                    continue
                e, n = entry.get(s, {}), entry.get("numpy", {})
                row.append(f"{n['median_s'] / e['median_s']:.3f}"
                           if "median_s" in e and "median_s" in n else "-")
            lines.append("| " + " | ".join(row) + " |")
        failed = [(name, s, e["check"]) for name, entry in run["workloads"].items()
                  for s, e in entry.items() if str(e.get("check", "")).startswith("FAILED")]
        if failed:
            lines += ["", "Failed checks (not timed):"] + [f"- {n} {s}: {c}"
                                                           for n, s, c in failed]
        lines.append("")
        lines += _peer_table(run)
    ct = res.get("compile")
    if ct:
        lines += ["## Compile time (ms)", "",
                  "Cold: fresh cache directory, the C compiler runs. Warm: a new process, "
                  "same cache (no C compiler; lowering, passes, verifier, emit, load).", "",
                  "| workload | " + " | ".join(f"{s} cold | {s} warm" for s in TARGETS) + " |",
                  "|---|" + "---|---|" * len(TARGETS)]
        for name in ct["cold"]:
            row = [name]
            for s in TARGETS:
                for kind in ("cold", "warm"):
                    v = ct[kind].get(name, {}).get(s)
                    row.append(f"{v * 1e3:.0f}" if isinstance(v, float) else str(v or "-"))
            lines.append("| " + " | ".join(row) + " |")
        lines.append("")
    lines += ["## Workloads", "", "| workload | shapes | FLOP formula | notes |",
              "|---|---|---|---|"]
    for name in res["workloads"]:
        w = by_name()[name]
        shapes = ", ".join(f"{k} {'x'.join(map(str, s))}" for k, s in w.shapes.items())
        lines.append(f"| {name} | {shapes} | {w.flop_formula} | {w.notes} |")
    lines += ["", "## Peers", ""] + [f"- {v['message']}" for v in res["peers"].values()]
    lines += ["", f"Plots: {res['plots']}", ""]
    return "\n".join(lines)


def plots(res: dict, out: Path) -> str:
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return ("not written: matplotlib is not importable (it is not a project "
                "dependency; `pip install matplotlib` into the venv to get them)")
    written = []
    for run in res["runs"]:
        t = run["threads"]
        names = list(run["workloads"])
        systems = [s for s in SYSTEMS if s in run["systems"]]
        for key, label in (("gflops", "GFLOP/s"), ("pct_peak", "% of FMA peak")):
            fig, ax = plt.subplots(figsize=(max(8, len(names) * 0.7), 5))
            width = 0.8 / len(systems)
            for i, s in enumerate(systems):
                vals = [run["workloads"][n].get(s, {}).get(key, 0.0) for n in names]
                ax.bar([j + i * width for j in range(len(names))], vals, width, label=s)
            ax.set_xticks([j + 0.4 - width / 2 for j in range(len(names))])
            ax.set_xticklabels(names, rotation=60, ha="right", fontsize=8)
            ax.set_ylabel(label)
            ax.set_yscale("log")
            ax.set_title(f"{label}, {t} thread(s)")
            ax.legend()
            fig.tight_layout()
            p = out / f"{key}_{t}t.png"
            fig.savefig(p, dpi=100)
            plt.close(fig)
            written.append(p.name)
    return ", ".join(written)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.run", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true",
                    help=f"smoke run: {','.join(QUICK)}; 3 repeats, 1 warm-up")
    ap.add_argument("--workloads", default="",
                    help="comma-separated names (default: all); `--list` shows them")
    ap.add_argument("--list", action="store_true", help="list the workloads and exit")
    ap.add_argument("--threads", default="1,2", help="thread counts (default 1,2)")
    ap.add_argument("--systems", default=",".join(SYSTEMS),
                    help="default: all (stripe_avx512 only where the CPU has AVX-512)")
    ap.add_argument("--out", default=str(Path(__file__).resolve().parent / "results"))
    ap.add_argument("--repeats", type=int, default=10, help="max timed rounds (default 10)")
    ap.add_argument("--warmup", type=int, default=2, help="warm-up rounds (default 2)")
    ap.add_argument("--budget", type=float, default=10.0,
                    help="seconds of timed rounds per workload and thread count; slow "
                         "workloads get fewer repeats, never fewer than 3 (default 10)")
    ap.add_argument("--no-compile-times", action="store_true")
    ap.add_argument("--peak", type=float, default=0.0,
                    help="GFLOP/s per core for '%% peak' instead of the FMA peak measured at "
                         "the start of each run (e.g. 97, a Zen 3 core's, to compare with "
                         "tables of that machine)")
    ap.add_argument("--settle", type=float, default=0.25,
                    help="seconds to wait, with 2+ threads, before each call of a system "
                         "that follows another one, so the other's spinning threads are "
                         "idle (default 0.25)")
    ap.add_argument("--warm-s", type=float, default=0.05,
                    help="after each pause (--settle), every system runs untimed for at "
                         "least this many seconds, and at least once, before it is timed "
                         "(default 0.05)")
    ap.add_argument("--keep-openblas-env", action="store_true",
                    help="keep OPENBLAS_CORETYPE/OPENBLAS_L2_SIZE for numpy (default: "
                         "removed in the worker, as they select a slower kernel)")
    ap.add_argument("--none-all-threads", action="store_true",
                    help="also time stripe_none at T>1 (it is single-threaded anyway)")
    ap.add_argument("--omp-wait-policy", default="",
                    help="OMP_WAIT_POLICY for the timed runs (default '': unset, libgomp's "
                         "own default, which spins briefly and then sleeps; PASSIVE sleeps "
                         "at once, which on a shared VM left the other core slow for every "
                         "call after a pause: docs/performance.md)")
    ap.add_argument("--alignment", choices=["64", "numpy"], default="64",
                    help="where the inputs and stripe's out= arrays start: '64' (default), "
                         "on a 64-byte boundary (stripe.arrays), the same arrays for numpy "
                         "and stripe, as TVM and PlaidML copy them into aligned buffers of "
                         "their own; 'numpy', where numpy allocates them (on 16-byte "
                         "boundaries, large ones typically 16 bytes past a 64-byte one, "
                         "where half of all 32-byte vector accesses cross a cache line)")
    ap.add_argument("--no-pin", action="store_true",
                    help="do not restrict the T-thread run to T CPUs (sched_setaffinity)")
    ap.add_argument("--peers", default="plaidml,tvm,torch,ort",
                    help="peers to run when present in the peers venv (default all; '' none)")
    ap.add_argument("--peer-timeout", type=float, default=600.0)
    ap.add_argument("--peer-rounds", type=int, default=8,
                    help="rounds of the stripe/peer turns per workload (default 8; the "
                         "timed calls, at most --repeats, are spread over them)")
    ap.add_argument("--worker", choices=["run", "compile-cold", "compile-warm"],
                    help=argparse.SUPPRESS)
    ap.add_argument("--worker-out", help=argparse.SUPPRESS)
    ap.add_argument("--with-peers", default="", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)

    if args.list:
        for w in all_workloads():
            print(f"{w.name:28s} {w.group:8s} {w.flop_formula}")
        return 0
    if args.worker:
        res = worker_run(args) if args.worker == "run" else worker_compile(args)
        Path(args.worker_out).write_text(json.dumps(res))
        return 0

    if args.quick:
        args.repeats, args.warmup, args.budget = 3, 1, 3.0
    names = ([n for n in args.workloads.split(",") if n] or
             (QUICK if args.quick else [w.name for w in all_workloads()]))
    unknown = [n for n in names if n not in by_name()]
    if unknown:
        ap.error(f"unknown workloads {unknown}; valid: {', '.join(by_name())}")
    threads = [int(t) for t in args.threads.split(",") if t]
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    started = time.time()
    res: dict = {"date": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
                 "machine": _machine(), "zen3_peak_gflops_per_core": ZEN3_PEAK_PER_CORE,
                 "workloads": names, "runs": [], "argv": sys.argv[1:]}
    print(f"stripe benchmarks: {len(names)} workloads, threads {threads}, "
          f"systems {args.systems}; output in {out}", flush=True)

    from stripe.codegen.build import missing_cpu_features
    from stripe.config import load_config
    kept = []
    for s in args.systems.split(","):
        configured = TARGETS.get(s) not in (None, "none")
        missing = missing_cpu_features(load_config(TARGETS[s]).cflags) if configured else []
        if missing:
            print(f"{s} skipped: this CPU lacks {', '.join(missing)}", flush=True)
        else:
            kept.append(s)
    args.systems = ",".join(kept)
    res["systems"] = kept

    res["peers"] = _peers.detect()
    for v in res["peers"].values():
        print(v["message"], flush=True)
    # the peers present and asked for are timed by the run worker, in turns with stripe
    args.with_peers = ",".join(p for p, info in res["peers"].items()
                               if info["status"] == "present" and p in args.peers.split(","))

    cache = Path(tempfile.mkdtemp(prefix="stripe-bench-cache-"))
    base_env = dict(os.environ, STRIPE_CACHE_DIR=str(cache))
    if not args.no_compile_times:
        print("compile time (cold, then warm in a new process):", flush=True)
        res["compile"] = {"cold": _run_worker("compile-cold", args, base_env, names),
                          "warm": _run_worker("compile-warm", args, base_env, names)}
    for t in threads:
        env = dict(base_env, OMP_NUM_THREADS=str(t), OPENBLAS_NUM_THREADS=str(t),
                   MKL_NUM_THREADS=str(t))
        if args.omp_wait_policy:
            env["OMP_WAIT_POLICY"] = args.omp_wait_policy
        if not args.keep_openblas_env:
            for k in OPENBLAS_ENV:
                env.pop(k, None)
        print(f"run with {t} thread(s):", flush=True)
        run = _run_worker("run", args, env, names)
        run["openblas_env"] = ({k: env.get(k) for k in OPENBLAS_ENV}
                               if any(env.get(k) for k in OPENBLAS_ENV)
                               else "unset for this run")
        res["runs"].append(run)
    res["wall_s"] = time.time() - started
    res["plots"] = plots(res, out)
    (out / "results.json").write_text(json.dumps(res, indent=1))
    md = markdown(res)
    (out / "results.md").write_text(md)
    print(md)
    print(f"wrote {out / 'results.json'}, {out / 'results.md'}; plots: {res['plots']}; "
          f"{res['wall_s']:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
