"""Neural-network ops of stripe.ops (docs/ops.md)."""

from __future__ import annotations

__all__: list[str] = []
