"""The C compiler flags a target may give, and what the compiler and this CPU make of them.

A hardware config's ``cflags:`` (and ``Target(cflags=...)``) reach the C compiler's command
line, and the code they produce runs in this process, so only flags known to be safe pass:
they may choose the optimisation level, debug info, the instruction set (checked against the
CPU when a program runs) and a few named code-generation options, never anything that
changes float or integer semantics, the ABI or linkage, or reads and writes files.

    cflag_problem("-O2")            # None: allowed
    cflag_problem("-ffast-math")    # "is not allowed: ...": why it is refused
    VALID_CFLAGS                    # the forms that are allowed, for error messages
    missing_cpu_features(flags)     # ISA extensions the flags compile for and this CPU lacks
    resolved_target(flags)          # what the compiler makes of the flags' target options

Instruction sets are checked twice: ``-mFEATURE`` by its name in ``/proc/cpuinfo`` (which
spells some differently: ``sse4.1`` is ``sse4_1``, ``avx512vnni`` is ``avx512_vnni``), and
everything the flags enable (``-march=bdver1`` enables ``fma4`` and ``xop``) against what
the compiler enables for ``-march=native`` on this CPU (gcc's ``-Q --help=target``).
"""

from __future__ import annotations

import os
import re
import subprocess
import sysconfig
from functools import cache
from pathlib import Path

# x86 instruction-set extensions by their -m spelling, with their /proc/cpuinfo name. Those
# in _ISA_FLAGS may be given as flags; the others are only recognised in what the compiler
# reports a -march value enables.
_CPUINFO = {
    "mmx": "mmx", "sse": "sse", "sse2": "sse2", "sse3": "pni", "ssse3": "ssse3",
    "sse4.1": "sse4_1", "sse4.2": "sse4_2", "sse4a": "sse4a", "popcnt": "popcnt",
    "lzcnt": "abm", "abm": "abm", "avx": "avx", "avx2": "avx2", "fma": "fma", "fma4": "fma4",
    "xop": "xop", "f16c": "f16c", "bmi": "bmi1", "bmi2": "bmi2", "tbm": "tbm", "adx": "adx",
    "movbe": "movbe", "aes": "aes", "pclmul": "pclmulqdq", "vaes": "vaes",
    "vpclmulqdq": "vpclmulqdq", "gfni": "gfni", "sha": "sha_ni", "cx16": "cx16",
    "sahf": "lahf_lm", "lwp": "lwp", "rdrnd": "rdrand", "rdseed": "rdseed",
    "fsgsbase": "fsgsbase", "xsave": "xsave", "xsaveopt": "xsaveopt", "xsavec": "xsavec",
    "xsaves": "xsaves", "clflushopt": "clflushopt", "clwb": "clwb", "clzero": "clzero",
    "prfchw": "3dnowprefetch", "rdpid": "rdpid", "mwaitx": "mwaitx", "pku": "pku",
    "3dnow": "3dnow", "3dnowa": "3dnowext", "movdiri": "movdiri", "movdir64b": "movdir64b",
    "serialize": "serialize", "waitpkg": "waitpkg",
    "avx512f": "avx512f", "avx512cd": "avx512cd", "avx512bw": "avx512bw",
    "avx512dq": "avx512dq", "avx512vl": "avx512vl", "avx512ifma": "avx512ifma",
    "avx512vbmi": "avx512vbmi", "avx512vbmi2": "avx512_vbmi2", "avx512vnni": "avx512_vnni",
    "avx512bitalg": "avx512_bitalg", "avx512vpopcntdq": "avx512_vpopcntdq",
    "avx512bf16": "avx512_bf16", "avx512fp16": "avx512_fp16",
    "avx512vp2intersect": "avx512_vp2intersect", "avx512er": "avx512er",
    "avx512pf": "avx512pf", "avx5124fmaps": "avx512_4fmaps", "avx5124vnniw": "avx512_4vnniw",
    "avxvnni": "avx_vnni", "amx-tile": "amx_tile", "amx-int8": "amx_int8",
    "amx-bf16": "amx_bf16",
}
_ISA_FLAGS = (
    "sse3", "ssse3", "sse4.1", "sse4.2", "sse4a", "popcnt", "lzcnt", "abm", "avx", "avx2",
    "fma", "fma4", "xop", "f16c", "bmi", "bmi2", "movbe", "aes", "pclmul", "vaes",
    "vpclmulqdq", "gfni", "sha", "avx512f", "avx512cd", "avx512bw", "avx512dq", "avx512vl",
    "avx512ifma", "avx512vbmi", "avx512vbmi2", "avx512vnni", "avx512bitalg",
    "avx512vpopcntdq", "avx512bf16", "avx512fp16", "avxvnni",
)
# named -f options that change neither results nor the ABI: which loops are unrolled,
# peeled, vectorised or unswitched, the frame pointer, inlining, scheduling, prefetching
_F_OPTIONS = (
    "-funroll-loops", "-fno-unroll-loops", "-fpeel-loops", "-fno-peel-loops",
    "-ftree-vectorize", "-fno-tree-vectorize", "-ftree-loop-vectorize",
    "-fno-tree-loop-vectorize", "-ftree-slp-vectorize", "-fno-tree-slp-vectorize",
    "-funswitch-loops", "-fno-unswitch-loops", "-fomit-frame-pointer",
    "-fno-omit-frame-pointer", "-fstrict-aliasing", "-fno-strict-aliasing",
    "-finline-functions", "-fno-inline-functions", "-fno-inline", "-fschedule-insns",
    "-fno-schedule-insns", "-fschedule-insns2", "-fno-schedule-insns2",
    "-fprefetch-loop-arrays", "-fno-prefetch-loop-arrays",
    "-fvect-cost-model=cheap", "-fvect-cost-model=dynamic", "-fvect-cost-model=unlimited",
    "-fvect-cost-model=very-cheap",
)
_PREFER_WIDTHS = ("none", "128", "256", "512")

VALID_CFLAGS: tuple[str, ...] = (
    "-O0 -O1 -O2 -O3 -Os",
    "-g -g0 -g1 -g2 -g3",
    "-march=NAME (an architecture the C compiler knows, or native)",
    "-mtune=NAME (likewise, or generic)",
    "-mprefer-vector-width=" + "|".join(_PREFER_WIDTHS),
    "-mFEATURE and -mno-FEATURE for FEATURE in " + " ".join(_ISA_FLAGS),
    " ".join(_F_OPTIONS),
)
"""The forms of the flags that are allowed, as an error message lists them."""

# refused flags with a reason of their own (the others are simply not on the list)
_REASONS = (
    (re.compile(r"-Ofast|-ffast-math|-ffinite-math-only|-fno-honor-(nans|infinities)"
                r"|-fno-signed-zeros|-fassociative-math|-freciprocal-math"
                r"|-funsafe-math-optimizations|-fcx-limited-range|-fno-signaling-nans"),
     "changes float results (NaN, infinity or rounding semantics)"),
    (re.compile(r"-ftrapv|-fsanitize.*|-fwrapv|-fno-wrapv|-fstrict-overflow"),
     "changes what integer overflow does (traps or semantics); STRIPE_SANITIZE runs the "
     "sanitizers"),
    (re.compile(r"-fcall-(used|saved)-.*|-ffixed-.*|-fleading-underscore|-fwhole-program"
                r"|-fpic|-fPIC|-fpie|-fPIE|-fno-pic|-fno-PIC|-fvisibility.*|-fcommon"
                r"|-fno-common|-fpack-struct.*|-fshort-.*|-freg-struct-return"
                r"|-fpcc-struct-return|-mabi=.*|-m32|-m64|-mx32|-mregparm.*"
                r"|-mno-red-zone|-mcmodel=.*"),
     "changes the ABI, registers or linkage of the built module"),
    (re.compile(r"-fplugin.*|-fdump.*|-fprofile.*|-fauto-profile.*|-fopt-info.*"
                r"|-fsave-optimization-record|-fstack-usage|-fcallgraph-info.*|-fopenmp"
                r"|-fopenacc|-flto.*|-f(test-)?coverage|-fdebug-prefix-map.*|-fmacro.*"),
     "reads or writes files, loads code, or changes linking"),
)
_MAX_FLAG = 64


def compiler() -> str:
    """The C compiler's command: ``$CC``, else the one Python was built with, else ``cc``."""
    env = os.environ.get("CC")
    if env:
        return env.split()[0]
    built = sysconfig.get_config_var("CC") or ""
    return built.split()[0] if built.split() else "cc"


def _run(cmd: list[str]) -> subprocess.CompletedProcess[str] | None:
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=60,
                              stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired):
        return None


@cache
def _accepted(cc: str, flag: str) -> bool:
    """Does the compiler compile an empty C file with ``flag``, without a word? True when
    the compiler cannot be run at all (the build then reports that)."""
    out = _run([cc, flag, "-S", "-x", "c", os.devnull, "-o", os.devnull])
    if out is None:
        return True
    return out.returncode == 0 and not out.stderr.strip()


def _target_flags(flags: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(f for f in flags if f.startswith("-m"))


@cache
def _report(cc: str, mflags: tuple[str, ...]) -> str:
    out = _run([cc, *mflags, "-Q", "--help=target"])
    if out is not None and out.returncode == 0 and "[enabled]" in out.stdout:
        return out.stdout.split("Known ")[0]  # without the lists of valid names
    # compilers without -Q --help=target (clang): the driver's command for the flags, which
    # shows what -march=native resolves to
    out = _run([cc, *mflags, "-###", "-E", "-x", "c", os.devnull])
    return "" if out is None else out.stderr


def resolved_target(flags: tuple[str, ...]) -> str:
    """What the C compiler makes of the target options among ``flags`` (``-march=native``
    resolved to this CPU's name and instruction sets): gcc's ``-Q --help=target``, or the
    driver's ``-###`` command for other compilers; empty when the compiler cannot tell.
    Cached per process."""
    return _report(compiler(), _target_flags(tuple(flags)))


def enabled_features(report: str) -> frozenset[str]:
    """The instruction-set extensions a :func:`resolved_target` report shows enabled."""
    found = set(re.findall(r"^\s+-m(\S+)\s+\[enabled\]", report, re.MULTILINE))
    found |= set(re.findall(r'"-target-feature" "\+([^"]+)"', report))
    return frozenset(f for f in found if f in _CPUINFO)


def host_features() -> frozenset[str] | None:
    """The extensions the compiler enables for ``-march=native`` here (None when it does
    not say)."""
    found = enabled_features(resolved_target(("-march=native",)))
    return found or None


@cache
def cpu_flags() -> frozenset[str] | None:
    """The CPU's feature flags from /proc/cpuinfo (None where that is not available)."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return None
    for line in text.splitlines():
        if line.startswith("flags"):
            return frozenset(line.split(":", 1)[1].split())
    return None


def missing_cpu_features(flags: tuple[str, ...], cpu: frozenset[str] | None = None,
                         *, ask_compiler: bool = True) -> list[str]:
    """The x86 extensions that ``flags`` compile for and this CPU lacks: each ``-mFEATURE``
    (not undone by a later ``-mno-FEATURE``) missing from /proc/cpuinfo's flags (``cpu``
    when given), then whatever else the flags enable (``-march=bdver1``: ``fma4``, ``xop``)
    that the compiler does not enable for ``-march=native`` here. Code built with them
    would die of an illegal instruction here. Empty when neither source knows the CPU.
    ``ask_compiler=False`` checks only the ``-mFEATURE`` flags against ``cpu`` (for a CPU
    other than this one)."""
    have = cpu_flags() if cpu is None else cpu
    wanted: dict[str, bool] = {}
    for flag in flags:
        m = re.fullmatch(r"-m(no-)?(.+)", flag)
        if m and m.group(2) in _CPUINFO:
            wanted.pop(m.group(2), None)
            wanted[m.group(2)] = not m.group(1)
    missing = [f for f, on in wanted.items()
               if on and have is not None and _CPUINFO[f] not in have]
    host = host_features() if ask_compiler else None
    if host is not None:
        target = enabled_features(resolved_target(tuple(flags)))
        missing += [f for f in sorted(target - host) if f not in missing]
    return missing


def cflag_problem(flag: str) -> str | None:
    """Why ``flag`` may not reach the C compiler (a phrase that follows the flag in a
    message), or None when it may. The instruction set a flag selects is checked against
    the CPU when a program built with it runs (:func:`missing_cpu_features`), so that a
    config for another machine still loads."""
    if not isinstance(flag, str):
        return "is not a string"
    if len(flag) > _MAX_FLAG or not re.fullmatch(r"-[A-Za-z0-9][A-Za-z0-9_.=+-]*", flag):
        return "is not allowed: not a single plain option"
    if re.fullmatch(r"-O[0-3s]|-g[0-3]?", flag) or flag in _F_OPTIONS:
        return None
    m = re.fullmatch(r"-m(arch|tune)=([a-z0-9][a-z0-9_.-]*)", flag)
    if m:
        if m.group(2) == "native" or (m.group(1) == "tune" and m.group(2) == "generic"):
            return None
        if not _accepted(compiler(), flag):
            return (f"is not allowed: the C compiler knows no {m.group(1)} "
                    f"'{m.group(2)}' for this machine")
        return None
    m = re.fullmatch(r"-mprefer-vector-width=(.*)", flag)
    if m:
        return None if m.group(1) in _PREFER_WIDTHS else "is not allowed: not a width"
    m = re.fullmatch(r"-m(no-)?(.+)", flag)
    if m and m.group(2) in _ISA_FLAGS:
        return None
    for pattern, reason in _REASONS:
        if pattern.fullmatch(flag):
            return f"is not allowed: it {reason}"
    return "is not allowed"


def cflag_ok(flag: str) -> bool:
    """True when ``flag`` may reach the C compiler's command line."""
    return cflag_problem(flag) is None


__all__ = ["VALID_CFLAGS", "cflag_ok", "cflag_problem", "compiler", "cpu_flags",
           "enabled_features", "host_features", "missing_cpu_features", "resolved_target"]
