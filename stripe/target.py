"""The target: the hardware facts of a config, declared once and read by every pass.

    target = load_config("cpu_avx2").target
    target.name, target.memories, target.compute, target.cflags
    target.memory("L2").size, target.cache_line, target.compute.units

A hardware config (``docs/hwconfigs.md``) declares its target's memories, compute units and
C compiler flags once, in its ``memories``, ``compute`` and ``cflags`` sections; the config
loader builds one :class:`Target` from them. The pipeline hands it to every pass next to the
pass's own options, and the C back end writes its SIMD code and compiler command line for
it. :data:`HOST` is the target of a program compiled without a config.
"""

from __future__ import annotations

from dataclasses import dataclass

DEFAULT_CACHE_LINE = 64
"""Bytes per cache line when a target declares no memory."""

MAX_UNITS = 1024
"""The most compute units a target (or a pass option) may give: the passes that share work
among them (autotile's balance term, hoist, threads) plan per unit."""


@dataclass(frozen=True)
class Memory:
    """A memory level or unit."""

    name: str
    size: int
    """Capacity in bytes."""
    line: int = DEFAULT_CACHE_LINE
    """Cache line or transfer width in bytes."""
    banks: int = 1
    """Number of banks (or units) the memory is split into."""
    bandwidth: int = 0
    """Bytes per cycle the memory delivers to the units that reach it (reads and writes
    together); 0: not given (the performance model then ignores its traffic)."""
    latency: int = 0
    """Cycles from a transfer's request to its first bytes; 0: not given."""
    main: bool = False
    """Program buffers (the caller's inputs and outputs, and allocations without a location)
    live here. At most one memory is main; a config without one has its program buffers in
    the host's memory."""


@dataclass(frozen=True)
class Compute:
    """The compute units."""

    units: int = 1
    """Cores or processing units that can run block points in parallel."""
    vector_width: int = 16
    """SIMD register width in bytes (16: SSE/NEON, 32: AVX2, 64: AVX-512). The C back end
    writes micro-kernels and reduction lanes for it."""
    vector_registers: int = 16
    """SIMD registers a micro-kernel may keep live (16: SSE/AVX2, 32: AVX-512/NEON)."""
    prefetch_ahead: int = 0
    """Bytes ahead that a row reduction (a loop the C back end runs in vector lanes)
    prefetches the program buffers it reads, one prefetch per lane group; 0: none. A
    hardware prefetcher stops at 4 KiB page boundaries, so a row of 4 KiB or more starts
    cold; 4096 fetches the next page (the next row of a 4096x1024 float32 softmax) while
    the current one is computed."""
    copy_prefetch: int = 0
    """Bytes of rows ahead that a copy (a leaf block inside a ``transfer``, such as the
    packing copies of ``cache``) prefetches its source: at the start of each row it
    prefetches the row ``ceil(copy_prefetch / row bytes)`` rows ahead, one prefetch per 64
    bytes; 0: none. A packed tile's rows are short runs far apart in the source (192 bytes
    every 2 KiB for a 7x7x512 convolution's weights), which a hardware prefetcher does not
    follow across."""
    kernel_unroll: int = 1
    """Points of the innermost reduction loop that a micro-kernel's C writes out per
    iteration (the rest of the range one at a time after it). gcc -O3 does not unroll loops
    on its own, and drops ``#pragma GCC unroll`` in the functions OpenMP outlines; unrolled
    too far, gcc interleaves the copies until they run out of registers and spill. 1: not
    unrolled; at most 16."""
    kernel_chains: int = 1
    """Independent chains of fused multiply-adds a micro-kernel needs in flight to keep the
    FMA units busy: the FMA latency times the FMA pipes (4 x 2 = 8 on Zen 3 and Zen 4). A
    kernel with fewer accumulators than that (a 1x32 matrix-vector kernel has 4 vectors; the
    2-row kernels of a ragged edge) waits on its own previous FMAs; with ``kernel_unroll``
    above 1 it then keeps up to ``kernel_unroll`` sets of accumulators, the unrolled points
    of the loop taking turns, and adds the sets together after the loop (so that a float
    sum is grouped differently: still every term once). Sets are added only while they fit
    in ``vector_registers``. 1: one set always; at most 64."""
    kernel_prefetch: int = 0
    """Bytes: a micro-kernel that reads its ``B`` operand in place from a program buffer
    (not from a packed copy), in rows further apart than its columns, prefetches at every
    reduction point the same row's next tile of columns -- what the kernel beside it will
    read -- when those rows take at most this many bytes (the kernel's reduction points
    times its row of columns), so that they are still in L1 when it does. A hardware
    prefetcher does not follow many short rows far apart across kernels. 0: never."""
    lane_chains: int = 1
    """Sets of lane accumulators a row reduction keeps (a loop the C back end runs in vector
    lanes: the sums of a layer norm, the dot products of a matrix-vector product). One set
    is one vector, and each step of the loop waits for the previous add to finish; with
    ``n`` sets the loop takes ``n`` vectors per step, one per set, and adds the sets
    together after it. Only loops whose body is cheap (arithmetic, comparisons, selections:
    no ``exp``, ``tanh``, division and the like, which keep the vector units busy anyway;
    see ``stripe.intrinsics``); a float sum is then grouped differently, every term still
    once. 1: one set; at most 16."""
    host_fallback: bool = True
    """False: every kernel must run on a declared unit (``Target.unit_decls``) with every
    access in a memory the unit reaches; compilation fails otherwise (an accelerator
    without a host to run what was not mapped). True: what no pass maps runs on the host."""
    clock_mhz: int = 0
    """The units' clock in MHz, for the performance model; 0: not given."""
    prefetch_writes: int = 0
    """1: a block that works row by row (a row reduction, then the elementwise kernels over
    the row, such as softmax or layer norm fused by ``fuse``) prefetches, for writing, the
    row of every program buffer it writes while its first row reduction reads the row, one
    prefetch per lane group. The output's lines then arrive while the row is reduced
    instead of on the store misses of the row's last pass. 0: no."""


UNIT_KINDS = ("compute", "transfer")
"""What a declared unit does: run kernels, or move data between memories (DMA)."""
KERNEL_KINDS = ("contraction", "reduction", "eltwise", "fill", "copy", "special")
"""The kinds of kernel a compute unit may declare it ``runs`` (:func:`stripe.mapping.kernel_kind`
tells a block's): ``contraction`` (a multiply-accumulate: a contraction aggregating with
``+`` a product), ``reduction`` (any other aggregation: sums, products, maxima, minima,
pooling), ``eltwise`` (tagged ``eltwise``), ``fill`` (the ``zero`` and ``init`` kernels and
the ``cache_init`` fills that set a buffer to a constant), ``copy`` (tagged ``copy``, or a
contraction that only assigns) and ``special`` (a whole-tensor special statement)."""


@dataclass(frozen=True)
class Unit:
    """A declared hardware unit: a compute unit (a MAC array, a vector unit) or a transfer
    unit (a DMA engine). Blocks run on it when their ``location`` names it."""

    name: str
    kind: str = "compute"
    """One of :data:`UNIT_KINDS`."""
    count: int = 1
    """Instances of the unit (a block's location bank selects one)."""
    runs: tuple[str, ...] = ()
    """The kernel kinds (:data:`KERNEL_KINDS`) a compute unit runs; empty for a transfer
    unit."""
    reaches: tuple[str, ...] = ()
    """The memories the unit reads and writes (a transfer unit: the memories it moves data
    between)."""
    macs_per_cycle: int = 0
    """Multiply-accumulates per cycle per instance (a contraction's points); 0: not given."""
    ops_per_cycle: int = 0
    """Other scalar operations (elementwise results, reduction steps) per cycle per
    instance; 0: not given."""
    bytes_per_cycle: int = 0
    """A transfer unit's bytes per cycle per instance; 0: bounded by the memories only."""


@dataclass(frozen=True)
class Target:
    """The hardware a program is compiled for: what every pass and the back end may read.

    ``memories`` are in the order the config lists them; ``cflags`` are the C compiler
    flags as configured (possibly none: see :attr:`compiler_flags`).
    """

    name: str
    memories: tuple[Memory, ...] = ()
    compute: Compute = Compute()
    cflags: tuple[str, ...] = ()
    unit_decls: tuple[Unit, ...] = ()
    """The declared units (the config's ``units`` section), in the order it lists them."""

    def unit(self, name: str) -> Unit:
        """The declared unit called ``name``; KeyError when there is none."""
        for u in self.unit_decls:
            if u.name == name:
                return u
        raise KeyError(name)

    @property
    def main_memory(self) -> Memory | None:
        """The memory marked ``main`` (where program buffers live), or None."""
        return next((m for m in self.memories if m.main), None)

    def memory(self, name: str) -> Memory:
        """The memory called ``name``; KeyError when the target has none."""
        for m in self.memories:
            if m.name == name:
                return m
        raise KeyError(name)

    def has_memory(self, name: str) -> bool:
        return any(m.name == name for m in self.memories)

    @property
    def cache_line(self) -> int:
        """Bytes per cache line, the unit that cost models count data movement in: the
        narrowest ``line`` of the memories (64 when the target declares none)."""
        return min((m.line for m in self.memories), default=DEFAULT_CACHE_LINE)

    @property
    def units(self) -> int:
        """Cores or processing units (``compute.units``)."""
        return self.compute.units

    @property
    def compiler_flags(self) -> tuple[str, ...]:
        """The flags the C compiler gets: ``cflags``, or ``-march=native`` when there are
        none (the host's own instruction set)."""
        return self.cflags or ("-march=native",)


HOST = Target("host", compute=Compute(vector_width=32, vector_registers=16),
              cflags=("-march=native",))
"""The target of ``stripe.compile(source, inputs)`` without a config (and of
``compile_program`` without a target): the machine that compiles, through ``-march=native``;
no memories declared (no pass runs without a config), and the C back end's SIMD code for
32-byte vectors and 16 registers, the AVX2 size, which gcc splits on narrower hardware and
which wider hardware runs as it is. It is fixed, not probed, so that the emitted C is the
same on every machine."""

__all__ = ["Compute", "DEFAULT_CACHE_LINE", "HOST", "KERNEL_KINDS", "Memory", "Target",
           "UNIT_KINDS", "Unit"]
