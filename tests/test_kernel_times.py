"""Each kernel of a program is a C function of its own, and ``Program.kernel_times`` times
them as they run (``stripe run --profile``)."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

import stripe
from stripe.arrays import ArgumentTypeError
from stripe.cli import main
from stripe.kernel_times import format_kernel_times

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"

# one large contraction between two small elementwise kernels
SOURCE = """
function (A[M, K], B[K, N], S[N]) -> (O, E) {
    E = A + 1.0;
    C[m, n : M, N] = +(A[m, k] * B[k, n]);
    O = C + S;
}
"""


def _inputs(rng, m=97, k=131, n=89):
    return {"A": rng.standard_normal((m, k)).astype(np.float32),
            "B": rng.standard_normal((k, n)).astype(np.float32),
            "S": rng.standard_normal(n).astype(np.float32)}


@pytest.mark.parametrize("target", ["none", "host"])
def test_every_kernel_is_a_function_of_its_own(rng, target):
    """The blocks of ``main`` become ``static`` functions, called in order from
    ``stripe_run``, each taking only the views it uses; the results stay right."""
    x = _inputs(rng)
    prog = stripe.compile(SOURCE, x, target=target)
    main_block = next(b for b in prog.ir.sub_blocks if "main" in b.tags)
    kernels = [b for b in main_block.stmts if isinstance(b, stripe.ir.Block)]
    defined = re.findall(r"static int (stripe_k\d+)\(", prog.c_source)
    assert len(defined) == len(kernels) >= 3
    run = prog.c_source.split("int stripe_run(void **args)")[1]
    assert re.findall(r"= (stripe_k\d+)\(", run) == defined  # each called once, in order
    for _, params in re.findall(r"static int (stripe_k\d+)\(([^)]*)\)", prog.c_source):
        assert params == "void" or all(p.split()[-1] in run for p in params.split(", "))
    got = prog(**x)
    np.testing.assert_allclose(got["O"], x["A"] @ x["B"] + x["S"], rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(got["E"], x["A"] + 1, rtol=1e-6)


def test_kernel_times_names_and_ranks_the_kernels(rng):
    x = _inputs(rng, 160, 200, 150)
    prog = stripe.compile(SOURCE, x, target="host")
    times = prog.kernel_times(x, repeat=3)
    main_block = next(b for b in prog.ir.sub_blocks if "main" in b.tags)
    assert [t.path for t in times] == [
        f"{prog.ir.name}/{main_block.name}/{b.name}"
        for b in main_block.stmts if isinstance(b, stripe.ir.Block)]
    assert all(t.seconds >= 0 and 0 <= t.share <= 1 for t in times)
    assert 0 < sum(t.share for t in times) <= 1.0 + 1e-9
    # the 160x200x150 contraction takes far longer than the elementwise kernels around it
    slowest = max(times, key=lambda t: t.seconds)
    assert "C" in slowest.writes or "O" in slowest.writes
    assert "A" in slowest.reads and "B" in slowest.reads
    table = format_kernel_times(times, top=1)
    assert table.splitlines()[1].startswith(slowest.path)
    assert re.search(rf"{len(times) - 1} more blocks", table)
    assert table.splitlines()[-1].startswith("total")
    # the program itself is unchanged by being timed
    assert "stripe_clock" not in prog.c_source
    np.testing.assert_allclose(prog(**x)["O"], x["A"] @ x["B"] + x["S"], rtol=1e-4, atol=1e-3)


def test_kernel_times_checks_its_arguments(rng):
    x = _inputs(rng, 5, 6, 7)
    prog = stripe.compile(SOURCE, x, target="none")
    for bad in (0, -1, 2.5, True):
        with pytest.raises(ArgumentTypeError, match="repeat"):
            prog.kernel_times(x, repeat=bad)
    with pytest.raises(stripe.ArgumentError, match="S"):
        prog.kernel_times({"A": x["A"], "B": x["B"]}, repeat=1)


def test_profile_option_of_run(capsys):
    args = ["run", str(EXAMPLES / "conv2d.tile"), "--input", "I=1x9x7x3:float32",
            "--input", "F=3x3x3x5:float32", "--repeat", "2"]
    assert main([*args, "--profile", "2"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"^block +ms +share +writes$", out, re.M)
    assert re.search(r"^total +\d+\.\d{3} +\d+\.\d%$", out, re.M)


def test_profile_option_of_run_on_an_onnx_model(tmp_path, capsys):
    """``stripe run model.onnx --profile`` times the imported model's kernels (the
    program's names: an ONNX model's kernels write its Tile tensors)."""
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper

    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x.1", "w"], ["y"]), helper.make_node("Relu", ["y"], ["z"])],
        "g", [helper.make_tensor_value_info("x.1", TensorProto.FLOAT, [5, 7])],
        [helper.make_tensor_value_info("z", TensorProto.FLOAT, [5, 3])],
        [helper.make_tensor("w", TensorProto.FLOAT, [7, 3], [0.5] * 21)])
    path = tmp_path / "m.onnx"
    onnx.save(helper.make_model(graph), str(path))
    assert main(["run", str(path), "--profile", "--repeat", "2"]) == 0
    out = capsys.readouterr().out
    assert "z: 5x3 float32" in out
    assert re.search(r"^program/main/\S+ +\d+\.\d{3} +\d+\.\d%", out, re.M)
