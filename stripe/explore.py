"""Design-space exploration: one program compiled and run for every combination of values of
some parameters of a hardware config, with the performance model's numbers for each.

    study = explore("npu_example", source, {"I": ((1, 16, 16, 64), "float32"), ...},
                    ["memories.SRAM.size=64KiB,128KiB,256KiB", "compute.units=2,4,8"],
                    out_dir="explore_out")
    study.rows          # one dict per combination, in the order of the --set values
    study.files         # explore.csv, explore.md, explore.png, configs/*.yaml

A parameter is a path over the config's keys (``docs/explore.md``):
``memories.<memory>.<key>``, ``compute.<key>``, ``units.<unit>.<key>`` and
``passes.<entry>.options.<key>``; several paths joined by ``+`` take the same value together
(``compute.units+units.PE.count=2,4``). Each path is checked against the config (the
memory, unit and pass entry must exist, the key must be one of theirs) and each variant is
loaded as a config, so a mistake is a :class:`ExploreError` naming the valid choices
before anything compiles.

A variant is a YAML file that ``extends`` the base config and overrides the chosen keys
(written to ``configs/`` of the output folder, and under the stripe cache folder, where its
contents name it so that the compile cache recognises it). Every variant is compiled
(``stripe.compile``, with its cache) and run once on seeded random inputs (those of
``stripe run --seed``); its row holds the model's cycles and time, the main memory's traffic,
each local memory's peak, each unit's utilisation and the bound that accounts for most
cycles. Rows are cached too, keyed by the compile cache's key of the program and the
variant, and the seed. Variants run in parallel processes, up to ``jobs`` (default: the
cores), with a progress bar on a terminal.
"""

from __future__ import annotations

import csv
import dataclasses
import hashlib
import io
import itertools
import json
import math
import os
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from .config import (
    COMPUTE_KEYS,
    MEMORY_KEYS,
    UNIT_KEYS,
    Config,
    ConfigError,
    list_configs,
    load_config,
)
from .errors import StripeError

MAX_VARIANTS = 4096
"""The most combinations one exploration may have."""
ROW_FORMAT = 1
"""The layout version of a cached row (part of its key)."""
PATHS = ("memories.<memory>.<key>", "compute.<key>", "units.<unit>.<key>",
         "passes.<entry>.options.<key>")
"""The parameter paths :func:`parse_set` accepts."""


class ExploreError(StripeError):
    """A ``--set`` that names nothing of the config, a value the config refuses, or an
    exploration too large."""


@dataclass(frozen=True)
class Axis:
    """One ``--set``: the config paths it sets (several: tied) and their values."""

    paths: tuple[tuple[str, ...], ...]
    values: tuple[Any, ...]
    texts: tuple[str, ...]
    """The values as given (the table's cells)."""

    @property
    def name(self) -> str:
        return "+".join(".".join(p) for p in self.paths)


def _split_values(text: str) -> list[str]:
    """``a,[b, c],d`` -> ``['a', '[b, c]', 'd']``: commas inside brackets do not split."""
    out, depth, cur = [], 0, []
    for ch in text:
        if ch in "[{":
            depth += 1
        elif ch in "]}":
            depth -= 1
        if ch == "," and depth == 0:
            out.append("".join(cur).strip())
            cur = []
        else:
            cur.append(ch)
    out.append("".join(cur).strip())
    return out


def parse_set(text: str) -> Axis:
    """``PATH[+PATH...]=V1,V2,...`` -> an :class:`Axis` (paths not yet checked against a
    config: :func:`check_axis`). Each value is read as YAML (``64KiB``, ``4``, ``true``,
    ``[a, b]``). ExploreError on a malformed text."""
    if not isinstance(text, str):
        raise TypeError(f"a --set must be a str, got {type(text).__name__}")
    name, eq, values = text.partition("=")
    if not eq or not name.strip():
        raise ExploreError(f"bad --set {text[:80]!r}: expected PATH=VALUE,VALUE,... with PATH "
                           f"one of {', '.join(PATHS)}")
    paths = tuple(tuple(p.strip().split(".")) for p in name.split("+"))
    if any(not all(paths_part for paths_part in p) for p in paths):
        raise ExploreError(f"bad --set {text[:80]!r}: an empty part in the path {name!r}")
    texts = _split_values(values)
    if not values.strip() or any(not t for t in texts):
        raise ExploreError(f"bad --set {text[:80]!r}: expected one or more values separated "
                           f"by commas")
    parsed = []
    for t in texts:
        try:
            parsed.append(yaml.safe_load(t))
        except yaml.YAMLError as e:
            raise ExploreError(f"bad --set {text[:80]!r}: the value {t[:40]!r} is not "
                               f"YAML ({type(e).__name__})") from None
    if len(set(texts)) != len(texts):
        raise ExploreError(f"bad --set {text[:80]!r}: a value is given twice")
    return Axis(paths, tuple(parsed), tuple(texts))


def _choices(kind: str, names: Sequence[str]) -> str:
    return f"valid {kind}: {', '.join(names) if names else 'none (the config declares none)'}"


def check_path(path: tuple[str, ...], config: Config) -> None:
    """ExploreError unless ``path`` names a key of ``config`` that a variant may set (see
    :data:`PATHS`); the message names the valid choices at the first wrong part."""
    shown = ".".join(path)
    head = path[0]
    if head == "memories":
        names = [m.name for m in config.target.memories]
        keys = [k for k in MEMORY_KEYS if k != "name"]
        _check_named(path, shown, "memories", names, keys)
    elif head == "units":
        names = [u.name for u in config.target.unit_decls]
        keys = [k for k in UNIT_KEYS if k != "name"]
        _check_named(path, shown, "units", names, keys)
    elif head == "compute":
        if len(path) != 2 or path[1] not in COMPUTE_KEYS:
            raise ExploreError(f"--set {shown}: expected compute.<key>; "
                               f"{_choices('keys', COMPUTE_KEYS)}")
    elif head == "passes":
        entries = {e.name: e for e in config.passes}
        if len(path) < 2 or path[1] not in entries:
            raise ExploreError(f"--set {shown}: no pass entry "
                               f"{path[1] if len(path) > 1 else ''!r} in {config.name}; "
                               f"{_choices('entries', list(entries))}")
        options = entries[path[1]].options
        keys = [f.name for f in dataclasses.fields(options)] \
            if dataclasses.is_dataclass(options) else []
        if len(path) != 4 or path[2] != "options" or path[3] not in keys:
            raise ExploreError(f"--set {shown}: expected passes.{path[1]}.options.<key>; "
                               f"{_choices('keys', keys)}")
    else:
        raise ExploreError(f"--set {shown}: {head!r} is not a parameter; valid paths: "
                           f"{', '.join(PATHS)}")


def _check_named(path: tuple[str, ...], shown: str, section: str, names: list[str],
                 keys: list[str]) -> None:
    if len(path) < 2 or path[1] not in names:
        what = "memory" if section == "memories" else "unit"
        raise ExploreError(f"--set {shown}: no {what} {path[1] if len(path) > 1 else ''!r} "
                           f"in the config; {_choices(section, names)}")
    if len(path) != 3 or path[2] not in keys:
        raise ExploreError(f"--set {shown}: expected {section}.{path[1]}.<key>; "
                           f"{_choices('keys', keys)}")


def variant_text(base_ref: str, config: Config, settings: Sequence[tuple[tuple[str, ...], Any]]
                 ) -> str:
    """The YAML of a config that extends ``base_ref`` (a shipped name or an absolute path)
    with each ``(path, value)`` of ``settings`` set."""
    memories: dict[str, dict[str, Any]] = {}
    units: dict[str, dict[str, Any]] = {}
    compute: dict[str, Any] = {}
    passes: dict[str, dict[str, Any]] = {}
    for path, value in settings:
        if path[0] == "memories":
            memories.setdefault(path[1], {"name": path[1]})[path[2]] = value
        elif path[0] == "units":
            units.setdefault(path[1], {"name": path[1]})[path[2]] = value
        elif path[0] == "compute":
            compute[path[1]] = value
        else:
            passes.setdefault(path[1], {"name": path[1], "options": {}})["options"][
                path[3]] = value
    doc: dict[str, Any] = {"target": config.target.name, "extends": base_ref}
    if memories:
        doc["memories"] = list(memories.values())
    if compute:
        doc["compute"] = compute
    if units:
        doc["units"] = list(units.values())
    if passes:
        doc["passes"] = list(passes.values())
    what = ", ".join(f"{'.'.join(p)}={v}" for p, v in settings)
    head = f"# stripe explore: {base_ref} with {what}\n"
    return head + yaml.safe_dump(doc, sort_keys=False, default_flow_style=None, width=96)


@dataclass
class Study:
    """What :func:`explore` returns: the axes, one row per combination (in the order of the
    axes' values, the last axis fastest) and the files written."""

    axes: tuple[Axis, ...]
    rows: list[dict[str, Any]]
    columns: list[str]
    files: list[Path] = field(default_factory=list)


def _base_ref(config_ref: str) -> str:
    if config_ref == "host":
        raise ExploreError("explore takes a shipped config name or a YAML path, not 'host' "
                           "(stripe configs lists the shipped ones)")
    if config_ref in list_configs():
        return config_ref
    return os.path.abspath(config_ref)


def _cache_root() -> Path:
    from stripe.codegen.build import usable_cache_dir

    root = usable_cache_dir() / "explore"
    root.mkdir(parents=True, exist_ok=True)
    return root


def _write_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def _measure(job: tuple[str, str, dict[str, tuple[tuple[int, ...], str]], int]
             ) -> dict[str, Any]:
    """Compile ``source`` for the variant config at ``path``, run it on seeded random inputs
    and return the numbers of its row (or ``{"error": message}``). Runs in a worker."""
    path, source, inputs, seed = job
    import stripe
    from stripe.cli import random_array
    from stripe.dtypes import to_dtype

    try:
        prog = stripe.compile(source, {k: (s, d) for k, (s, d) in inputs.items()},
                              target=path)
        rng = np.random.default_rng(seed)
        arrays = {name: random_array(rng, shape, to_dtype(dt))
                  for name, (shape, dt) in inputs.items()}
        prog(**arrays)
        stats = prog.stats()
    except StripeError as e:
        return {"error": " ".join(str(e).split())[:300]}
    return summarise(stats)


def _in_worker(job: tuple[str, str, dict[str, tuple[tuple[int, ...], str]], int]
               ) -> dict[str, Any]:
    """:func:`_measure` in a process of its own (``python -m stripe.explore``, the job as
    JSON on stdin, the row as JSON on stdout): a variant that crashes its process gives an
    error row, and the caller's ``__main__`` is never imported again."""
    try:
        done = subprocess.run([sys.executable, "-m", "stripe.explore"], input=json.dumps(job),
                              capture_output=True, text=True, check=False)
    except OSError as e:
        return {"error": f"cannot start a worker: {e.strerror or e}"}
    lines = done.stdout.strip().splitlines()
    if done.returncode == 0 and lines:
        try:
            row = json.loads(lines[-1])
        except ValueError:
            row = None
        if isinstance(row, dict):
            return row
    tail = " ".join(done.stderr.split()[-40:])
    return {"error": f"the worker exited with status {done.returncode}: {tail}"[:300]}


def summarise(stats: Mapping[str, Any]) -> dict[str, Any]:
    """A row's numbers from ``Program.stats()``: the model's cycles and time (µs), the main
    memory's measured traffic, each local memory's peak, each unit's utilisation and the
    bound of most cycles (the outermost stages' cycles summed by their bound)."""
    model = stats.get("model")
    row: dict[str, Any] = {}
    main = stats.get("main", {})
    row["dram_bytes"] = int(main.get("bytes_in", 0)) + int(main.get("bytes_out", 0))
    if model is None:
        row["error"] = "the config declares no units: no performance model"
        return row
    row["cycles"] = model["cycles"]
    row["time_us"] = None if model["seconds"] is None else model["seconds"] * 1e6
    for name, mem in model["memories"].items():
        if not mem.get("main"):  # the main memory's traffic is dram_bytes
            row[f"{name}_bytes"] = mem["bytes"]
            row[f"{name}_peak"] = mem["peak_bytes"]
    for name, unit in model["units"].items():
        row[f"{name}_util"] = unit["utilisation"]
    by_bound: dict[str, float] = {}
    for s in model["stages"]:
        if s["depth"] == 0:
            by_bound[s["bound"]] = by_bound.get(s["bound"], 0.0) + s["cycles"]
    row["bound"] = max(sorted(by_bound), key=lambda b: by_bound[b]) if by_bound else ""
    row["not_modelled"] = len(model["not_modelled"])
    return row


def explore(config_ref: str, source: str, inputs: Mapping[str, tuple[Sequence[int], str]],
            sets: Sequence[str], *, out_dir: str | os.PathLike[str] | None = None,
            jobs: int | None = None, seed: int = 0, plot: bool = True,
            progress: Callable[[str, int, int], None] | None = None) -> Study:
    """Compile and run Tile ``source`` (its ``inputs``: name -> (shape, dtype name)) for
    every combination of the ``sets`` (``PATH=V1,V2``) applied to the config ``config_ref``
    (a shipped name or a YAML path). Writes ``explore.csv``, ``explore.md``, ``configs/``
    and, when ``plot`` and matplotlib is installed, ``explore.png`` into ``out_dir`` (none
    when None). ``jobs``: parallel processes (default: the cores). ``progress``: a callback
    ``(stage, done, total)`` (:mod:`stripe.progress`), told of each finished variant."""
    import stripe

    if not isinstance(config_ref, (str, os.PathLike)):
        raise TypeError(f"config must be a config name or a path, got "
                        f"{type(config_ref).__name__}")
    config_ref = os.fspath(config_ref)
    if isinstance(sets, str) or not sets:
        raise ExploreError("explore needs at least one --set PATH=VALUE,... (a list of them)")
    if jobs is not None and (not isinstance(jobs, int) or jobs < 1):
        raise ExploreError(f"jobs must be a positive integer, got {jobs!r}")
    base_ref = _base_ref(config_ref)
    base = load_config(base_ref)
    axes = tuple(parse_set(s) for s in sets)
    seen: set[tuple[str, ...]] = set()
    for axis in axes:
        for path in axis.paths:
            check_path(path, base)
            if path in seen:
                raise ExploreError(f"--set {'.'.join(path)} is given twice")
            seen.add(path)
    count = math.prod(len(a.values) for a in axes)
    if count > MAX_VARIANTS:
        raise ExploreError(f"{count} combinations: at most {MAX_VARIANTS}")
    if not isinstance(inputs, Mapping):
        raise TypeError(f"inputs must be a mapping from input name to (shape, dtype), got "
                        f"{type(inputs).__name__}")
    try:
        specs = {k: (tuple(int(n) for n in s), str(getattr(d, "value", d)))
                 for k, (s, d) in inputs.items()}
    except (TypeError, ValueError):
        raise TypeError("inputs must map each input name to a (shape, dtype) pair, e.g. "
                        "{'A': ((16, 24), 'float32')}") from None
    program = stripe.lower(source, specs)  # errors in the program surface here, once
    from .pipeline_cache import key as pipeline_key

    root = _cache_root()
    combos = list(itertools.product(*(range(len(a.values)) for a in axes)))
    variants: list[tuple[Path, str, str]] = []  # (config path, yaml text, row cache key)
    for combo in combos:
        settings = [(path, axis.values[k]) for axis, k in zip(axes, combo)
                    for path in axis.paths]
        text = variant_text(base_ref, base, settings)
        digest = hashlib.sha256(text.encode()).hexdigest()[:24]
        path = root / f"variant_{digest}.yaml"
        if not path.exists():
            _write_atomic(path, text)
        try:
            config = load_config(path)
        except ConfigError as e:
            what = ", ".join(f"{axis.name}={axis.texts[k]}" for axis, k in zip(axes, combo))
            raise ExploreError(f"the variant {what} is not a valid config: "
                               f"{e.bare_message}") from None
        rkey = hashlib.sha256(f"{ROW_FORMAT}\0{pipeline_key(program, config, True)}\0"
                              f"{seed}".encode()).hexdigest()[:40]
        variants.append((path, text, rkey))
    rows: list[dict[str, Any] | None] = [None] * len(combos)
    todo = []
    for k, (_, _, rkey) in enumerate(variants):
        cached = _load_row(root / f"row_{rkey}.json", rkey)
        if cached is not None:
            rows[k] = cached
        else:
            todo.append(k)
    done = len(combos) - len(todo)
    if progress is not None:
        progress("variants", done, len(combos))
    jobs_list = [(str(variants[k][0]), source, specs, seed) for k in todo]
    workers = min(jobs or os.cpu_count() or 1, len(todo))

    def finished(k: int, row: dict[str, Any]) -> None:
        nonlocal done
        rows[k] = row
        if "error" not in row or row.get("cycles") is not None:
            rkey = variants[k][2]
            _write_atomic(root / f"row_{rkey}.json",
                          json.dumps({"key": rkey, "row": row}, sort_keys=True))
        done += 1
        if progress is not None:
            progress("variants", done, len(combos))

    if workers <= 1:
        for k, job in zip(todo, jobs_list):
            finished(k, _measure(job))
    elif todo:
        with ThreadPoolExecutor(workers) as pool:  # each thread waits on one worker process
            futures = {pool.submit(_in_worker, job): k for k, job in zip(todo, jobs_list)}
            for future in as_completed(futures):
                finished(futures[future], future.result())
    if progress is not None:
        progress("done", len(combos), len(combos))
    full: list[dict[str, Any]] = []
    for combo, row in zip(combos, rows):
        cells = {axis.name: axis.texts[k] for axis, k in zip(axes, combo)}
        full.append(cells | (row or {}))
    columns = [a.name for a in axes] + _metric_columns(full)
    study = Study(axes, full, columns)
    if out_dir is not None:
        study.files = write(study, Path(out_dir), [t for _, t, _ in variants], plot=plot)
    return study


def _load_row(path: Path, rkey: str) -> dict[str, Any] | None:
    """A cached row, or None when there is none or it is not one (anything unexpected is a
    miss: the variant runs again)."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or data.get("key") != rkey or not isinstance(
            data.get("row"), dict):
        return None
    return data["row"]


def _metric_columns(rows: list[dict[str, Any]]) -> list[str]:
    """The metric columns present in ``rows``: cycles, time, DRAM traffic, then per memory
    bytes and peak, per unit utilisation, the bound, errors; in a fixed order."""
    present = {k for r in rows for k in r}
    first = [c for c in ("cycles", "time_us", "dram_bytes") if c in present]
    mems = sorted(c for c in present if c.endswith("_bytes") and c != "dram_bytes")
    peaks = sorted(c for c in present if c.endswith("_peak"))
    utils = sorted(c for c in present if c.endswith("_util"))
    last = [c for c in ("bound", "not_modelled", "error") if c in present]
    return first + mems + peaks + utils + last


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:.4g}" if abs(value) < 1 else f"{value:.1f}"
    return str(value)


def table_text(study: Study, kind: str = "md") -> str:
    """The study's table as markdown (``md``) or CSV (``csv``); deterministic."""
    if kind == "csv":
        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        w.writerow(study.columns)
        for r in study.rows:
            w.writerow([_cell(r.get(c)) for c in study.columns])
        return buf.getvalue()
    lines = ["| " + " | ".join(study.columns) + " |",
             "|" + "|".join("---" for _ in study.columns) + "|"]
    for r in study.rows:
        lines.append("| " + " | ".join(_cell(r.get(c)).replace("|", "/")
                                       for c in study.columns) + " |")
    return "\n".join(lines) + "\n"


def write(study: Study, out: Path, variant_texts: Sequence[str], *, plot: bool = True
          ) -> list[Path]:
    """Write the table (CSV and markdown), the variant configs and the plot into ``out``."""
    try:
        (out / "configs").mkdir(parents=True, exist_ok=True)
        files = [out / "explore.csv", out / "explore.md"]
        files[0].write_text(table_text(study, "csv"))
        files[1].write_text(table_text(study, "md"))
        for k, text in enumerate(variant_texts):
            p = out / "configs" / f"variant_{k:03d}.yaml"
            p.write_text(text)
        if plot and plot_study(study, out / "explore.png"):
            files.append(out / "explore.png")
    except OSError as e:
        raise ExploreError(f"cannot write the results to {str(out)!r:.200}: "
                           f"{e.strerror or e}") from e
    return files


PLOT_METRICS = ("cycles", "dram_bytes")
"""The metrics plotted first; then each memory's peak and each unit's utilisation."""


def plot_study(study: Study, path: Path) -> bool:
    """A grid of line plots, one row per metric (modelled cycles, DRAM traffic, each local
    memory's peak, each unit's utilisation) and one column per axis: the metric against
    the axis's values, one line per combination of the other axes. False (and nothing
    written) when matplotlib is not installed (the ``explore`` extra)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    present = set(study.columns)
    metrics = [m for m in PLOT_METRICS if m in present]
    metrics += [c for c in study.columns if c.endswith("_peak")]
    metrics += [c for c in study.columns if c.endswith("_util")
                and any(r.get(c) for r in study.rows)]
    axes = study.axes
    fig, grid = plt.subplots(len(metrics), len(axes), squeeze=False,
                             figsize=(3.6 * len(axes) + 1.6, 2.1 * len(metrics) + 0.4))
    for j, axis in enumerate(axes):
        others = [a for a in axes if a is not axis]
        groups: dict[tuple[str, ...], list[dict[str, Any]]] = {}
        for r in study.rows:
            groups.setdefault(tuple(r[a.name] for a in others), []).append(r)
        for i, metric in enumerate(metrics):
            ax = grid[i][j]
            for label, rs in groups.items():
                xs = [axis.texts.index(r[axis.name]) for r in rs]
                ys = [r.get(metric) for r in rs]
                pts = [(x, y) for x, y in zip(xs, ys) if y is not None]
                if not pts:
                    continue
                name = ", ".join(f"{a.name.split('.')[-1]}={v}" for a, v in zip(others, label))
                ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o",
                        label=name or None)
            ax.set_xticks(range(len(axis.texts)), axis.texts, fontsize=7)
            ax.tick_params(axis="y", labelsize=7)
            if i == len(metrics) - 1:
                ax.set_xlabel(axis.name, fontsize=8)
            if j == 0:
                ax.set_ylabel(metric.replace("_", " "), fontsize=8)
            if i == 0 and others:
                ax.legend(fontsize=6)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=80)
    plt.close(fig)
    try:  # a palette of 64 colours: a quarter of the bytes, the same picture
        from PIL import Image

        buf.seek(0)
        Image.open(buf).convert("RGB").quantize(colors=64).save(path, optimize=True)
    except ImportError:
        path.write_bytes(buf.getvalue())
    return True


def main_progress() -> Callable[[str, int, int], None]:
    """A progress callback for the command line: :class:`stripe.progress.TerminalBar` on
    stderr (drawn only on a terminal)."""
    try:
        from .progress import TerminalBar
    except ImportError:  # a plain count of the variants instead
        def count(stage: str, done: int, total: int) -> None:
            if sys.stderr.isatty():
                end = "\n" if stage == "done" else ""
                sys.stderr.write(f"\rexplored {done}/{total} variants{end}")
                sys.stderr.flush()
        return count
    return TerminalBar(sys.stderr, delay=0.0)


def _worker() -> int:
    """The worker's entry point: a job (JSON) on stdin, its row (JSON) on stdout."""
    path, source, inputs, seed = json.loads(sys.stdin.read())
    specs = {k: (tuple(shape), dtype) for k, (shape, dtype) in inputs.items()}
    print(json.dumps(_measure((path, source, specs, int(seed)))))
    return 0


if __name__ == "__main__":
    sys.exit(_worker())


__all__ = ["Axis", "ExploreError", "MAX_VARIANTS", "PATHS", "Study", "check_path", "explore",
           "parse_set", "summarise", "table_text", "variant_text", "write"]
