"""Array ops of stripe.ops (docs/ops_array.md)."""

__all__: list[str] = []
