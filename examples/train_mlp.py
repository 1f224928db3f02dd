"""Train a small multi-layer perceptron written in Tile, with its gradient from stripe.gradient.

The network (2 inputs, one tanh hidden layer, a softmax over 2 classes) and its mean
cross-entropy loss are one Tile function; ``stripe.gradient`` turns it into the Tile function
of the loss's gradient with respect to the weights and biases. Both are compiled once and run
at every step of plain full-batch gradient descent on a synthetic, seeded data set: points of
the plane labelled by the sign of ``x * y`` (an XOR pattern that no linear model separates).

    .venv/bin/python examples/train_mlp.py [--steps 300] [--lr 0.5] [--target cpu_avx2]
"""

from __future__ import annotations

import argparse

import numpy as np

import stripe

NETWORK = """
function (X[N, D], Y[N, C], W1[D, H], B1[H], W2[H, C], B2[C]) -> (Loss) {
    Z1[n, h : N, H] = +(X[n, d] * W1[d, h]);
    A1 = tanh(Z1 + B1);
    Z2[n, c : N, C] = +(A1[n, h] * W2[h, c]);
    LogP = builtin_logsoftmax(Z2 + B2, N, C);
    T[] = +(Y[n, c] * LogP[n, c]);
    Loss = -T / N;
}
"""

PARAMS = ("W1", "B1", "W2", "B2")


def make_data(n: int = 256, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """``n`` points uniform in [-1, 1]^2 and their one-hot labels (class 1 where x*y > 0)."""
    rng = np.random.default_rng(seed)
    x = rng.uniform(-1.0, 1.0, (n, 2)).astype(np.float32)
    label = (x[:, 0] * x[:, 1] > 0).astype(np.int64)
    return x, np.eye(2, dtype=np.float32)[label]


def init_params(hidden: int = 16, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed + 1)
    return {
        "W1": (rng.standard_normal((2, hidden)) * 1.0).astype(np.float32),
        "B1": np.zeros(hidden, np.float32),
        "W2": (rng.standard_normal((hidden, 2)) / np.sqrt(hidden)).astype(np.float32),
        "B2": np.zeros(2, np.float32),
    }


def train(steps: int = 300, lr: float = 0.5, seed: int = 0, hidden: int = 16,
          target: str | None = None, log_every: int = 0) -> list[float]:
    """Train for ``steps`` steps; returns the loss before each step and after the last."""
    x, y = make_data(seed=seed)
    params = init_params(hidden, seed)
    arrays = {"X": x, "Y": y, **params}
    forward = stripe.compile(NETWORK, arrays, target=target)
    grad_source = stripe.gradient(NETWORK, wrt=list(PARAMS), of="Loss", inputs=arrays)
    one = np.ones((), np.float32)
    backward = stripe.compile(grad_source, {**arrays, "Loss_grad": one}, target=target)
    losses: list[float] = []
    for step in range(steps + 1):
        loss = float(forward(**arrays)["Loss"])
        losses.append(loss)
        if log_every and step % log_every == 0:
            print(f"step {step:4d}  loss {loss:.4f}")
        if step == steps:
            break
        grads = backward(**arrays, Loss_grad=one)
        for p in PARAMS:
            arrays[p] = arrays[p] - np.float32(lr) * grads[f"{p}_grad"]
    return losses


def accuracy(params: dict[str, np.ndarray], seed: int = 0) -> float:
    x, y = make_data(seed=seed)
    h = np.tanh(x @ params["W1"] + params["B1"])
    return float(np.mean((h @ params["W2"] + params["B2"]).argmax(1) == y.argmax(1)))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--lr", type=float, default=0.5)
    ap.add_argument("--target", default=None, help="a shipped config, e.g. cpu_avx2")
    ap.add_argument("--print-gradient", action="store_true",
                    help="print the gradient's Tile source and exit")
    args = ap.parse_args()
    if args.print_gradient:
        print(stripe.gradient(NETWORK, wrt=list(PARAMS), of="Loss"))
        return
    losses = train(args.steps, args.lr, target=args.target, log_every=50)
    print(f"loss {losses[0]:.4f} -> {losses[-1]:.4f}")


if __name__ == "__main__":
    main()
