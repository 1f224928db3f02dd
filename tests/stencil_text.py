"""Stencils written in tests as YAML flow mappings, the form a config file writes them in:
``stencil_from("{startup_cost: 8, idxs: [{name: m, size: 6, outs: [-1], ins: [-1, 0]}]}")``."""

from __future__ import annotations

import yaml

from stripe.passes.transforms.stencils import Stencil, StencilIndex


def stencil_from(text: str) -> Stencil:
    """The :class:`Stencil` that ``text`` (a YAML flow mapping) describes."""
    data = dict(yaml.safe_load(text))
    idxs = tuple(StencilIndex(**{k: tuple(v) if isinstance(v, list) else v
                                 for k, v in item.items()}) for item in data.pop("idxs"))
    for key in ("startup_cost", "point_cost"):
        if key in data:
            data[key] = float(data[key])
    return Stencil(idxs=idxs, **data)
