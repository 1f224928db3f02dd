"""The ``host`` target: the shipped CPU config that fits the machine, sized to its cores.

``stripe.compile(source, inputs)`` (no ``target``) and ``target="host"`` compile for this
machine: the first of :data:`HOST_CONFIGS` whose instruction sets the CPU has (read from
``/proc/cpuinfo``; where the CPU's features are unknown, the portable ``cpu_generic``), with
``compute.units`` set to :func:`available_units` — the cores this process may run on — in
place of the fixed count the shipped file holds. The config is named ``host`` and keeps a
note of what it was made from (``Config.extends``: the shipped config's file first), so traces
and ``stripe configs`` show it; its text (``repr``), and so the pipeline cache's key,
holds the units and flags detected, and a program compiled on one machine is never
served to a process with other cores or another CPU.

``target="none"`` keeps the back end's decision passes only, for :data:`stripe.target.HOST`
(the fixed ``-march=native`` target), as a compile without any config.
"""

from __future__ import annotations

import dataclasses
import os
from functools import lru_cache

from . import cflags as _cflags
from .config import Config, load_config
from .target import MAX_UNITS

HOST_CONFIGS: tuple[str, ...] = ("cpu_avx512", "cpu_avx2", "cpu_generic")
"""Shipped CPU configs, best first; the last needs no instruction set beyond the baseline."""

NAME = "host"
"""The target name that selects the host config."""

NO_PASSES = "none"
"""The target name that runs no config's passes (the back end's defaults only)."""


def available_units(environ: os._Environ[str] | dict[str, str] | None = None) -> int:
    """Cores this process may use: the CPUs in its affinity mask (``os.sched_getaffinity``,
    else ``os.cpu_count()``), lowered to ``OMP_NUM_THREADS`` when that is set to a positive
    integer (its first entry, for a nested list such as ``4,2``); at least 1, at most
    :data:`stripe.target.MAX_UNITS`. An ``OMP_NUM_THREADS`` that is not a positive integer
    is ignored, as OpenMP ignores it."""
    env = os.environ if environ is None else environ
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 1
    first = env.get("OMP_NUM_THREADS", "").split(",")[0].strip()
    if first.isdigit() and 0 < int(first):
        cores = min(cores, int(first))
    return max(1, min(cores, MAX_UNITS))


def choose_config(cpu_flags: frozenset[str] | None, *, this_cpu: bool = False) -> str:
    """The name of the first of :data:`HOST_CONFIGS` whose ``-mFEATURE`` flags are all in
    ``cpu_flags`` (``/proc/cpuinfo`` spelling); the last one when the flags are unknown.
    ``this_cpu=True`` also asks the C compiler what each config's flags enable beyond them
    (:func:`stripe.cflags.missing_cpu_features`): for the CPU this process runs on."""
    if cpu_flags is None:
        return HOST_CONFIGS[-1]
    for name in HOST_CONFIGS:
        flags = load_config(name).cflags
        if not _cflags.missing_cpu_features(flags, cpu_flags, ask_compiler=this_cpu):
            return name
    return HOST_CONFIGS[-1]


@lru_cache(maxsize=16)
def _host_config(base: str, units: int) -> Config:
    config = load_config(base)
    compute = dataclasses.replace(config.compute, units=units)
    target = dataclasses.replace(config.target, name=NAME, compute=compute)
    return dataclasses.replace(config, name=NAME, target=target,
                               extends=(config.path or base,) + config.extends)


def host_config() -> Config:
    """The config of ``target="host"`` for this process, detected at each call (the
    affinity mask or ``OMP_NUM_THREADS`` may change); configs are memoised per result."""
    return _host_config(choose_config(_cflags.cpu_flags(), this_cpu=True), available_units())


__all__ = ["HOST_CONFIGS", "NAME", "NO_PASSES", "available_units", "choose_config",
           "host_config"]
