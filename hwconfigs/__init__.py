"""Hardware configurations shipped as package data (``stripe.hwconfigs``)."""
