"""Back ends (``stripe.codegen``). The C emitter arrives with the C back-end issue."""
