"""The pass pool (``stripe.passes``). Passes arrive with the pass-manager issue."""
