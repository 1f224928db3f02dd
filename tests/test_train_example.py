"""examples/train_mlp.py: a Tile MLP trained with the gradient stripe.gradient writes; the loss
must fall from ln 2 to below 0.15 in 300 full-batch steps, and the trained network must
classify the XOR-like data set it was trained on."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "train_mlp.py"


def load_example():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("train_mlp", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_training_converges() -> None:
    ex = load_example()
    losses = ex.train(steps=300, lr=0.5, seed=0)
    assert abs(losses[0] - np.log(2)) < 0.05  # an untrained two-class softmax
    assert losses[-1] < 0.15, losses[::50]
    assert all(b <= a + 1e-4 for a, b in zip(losses[::25], losses[25::25])), losses[::25]


def test_gradient_of_the_network_matches_numpy() -> None:
    """The compiled gradient agrees with the same derivatives written by hand in numpy."""
    import stripe
    from stripe.gradient import gradient

    ex = load_example()
    x, y = ex.make_data(n=64, seed=3)
    params = {k: v.astype(np.float64) for k, v in ex.init_params(8, seed=3).items()}
    arrays = {"X": x.astype(np.float64), "Y": y.astype(np.float64), **params}
    g = gradient(ex.NETWORK, wrt=list(ex.PARAMS), of="Loss", inputs=arrays)
    got = stripe.compile(g, {**arrays, "Loss_grad": np.ones(())})(**arrays, Loss_grad=np.ones(()))
    h = np.tanh(arrays["X"] @ params["W1"] + params["B1"])
    z = h @ params["W2"] + params["B2"]
    p = np.exp(z - z.max(1, keepdims=True))
    p /= p.sum(1, keepdims=True)
    dz = (p - arrays["Y"]) / len(x)
    dh = dz @ params["W2"].T * (1 - h * h)
    want = {"W2": h.T @ dz, "B2": dz.sum(0), "W1": arrays["X"].T @ dh, "B1": dh.sum(0)}
    for k, v in want.items():
        np.testing.assert_allclose(got[f"{k}_grad"], v, rtol=1e-9, atol=1e-12, err_msg=k)
