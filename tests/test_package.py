"""The install layout: one ``stripe`` namespace, sub-packages from the design card."""

import importlib
import subprocess
import sys

import stripe


def test_subpackages_live_under_stripe():
    for name in ("stripe.passes", "stripe.codegen", "stripe.tile"):
        assert importlib.import_module(name).__name__ == name


def test_no_top_level_passes_or_codegen(tmp_path):
    # Run outside the checkout so the working directory is not on sys.path.
    code = "import importlib.util as u; print(u.find_spec('passes'), u.find_spec('codegen'))"
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True,
                         text=True, check=True).stdout
    assert out.split() == ["None", "None"]


def test_public_api_names():
    for name in ("lower", "interpret", "print_ir", "parse_ir", "verify", "StripeError",
                 "TileSyntaxError", "VerifyError"):
        assert hasattr(stripe, name), name
