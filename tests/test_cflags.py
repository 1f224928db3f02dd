"""The C compiler flags a hardware config may give (stripe.cflags)."""

from __future__ import annotations

from pathlib import Path

import pytest

from stripe.cflags import cflag_ok
from stripe.config import ConfigError, load_config


def error(tmp_path: Path, text: str) -> ConfigError:
    path = tmp_path / "x.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError) as err:
        load_config(path)
    assert err.value.path == str(path)
    return err.value


@pytest.mark.parametrize("flag", [
    "-fplugin=evil.so", "-o", "/tmp/x", "-O3; rm -rf /", "-fdump-tree-all", "-Wl,-rpath,/x",
    "-I/etc", "-DX=1", "-mllvm", "-fprofile-generate", "--param", "-march=native; ls",
    "-fno-dump-x", "-include", "@file",
])
def test_cflags_outside_the_whitelist(tmp_path: Path, flag: str):
    assert not cflag_ok(flag)
    e = error(tmp_path, f'target: t\ncflags:\n  - -O2\n  - "{flag}"\n')
    assert e.line == 4 and f"cflag '{flag}' is not allowed" in str(e)
    assert "valid flags: -O0 -O1 -O2 -O3 -Os -Ofast, " in str(e)


@pytest.mark.parametrize("flag", ["-O3", "-Os", "-march=x86-64-v3", "-march=native",
                                  "-mtune=generic", "-mavx2", "-mno-avx512f", "-mfma",
                                  "-ffast-math", "-fno-math-errno", "-funroll-loops", "-g"])
def test_cflags_inside_the_whitelist(flag: str):
    assert cflag_ok(flag)
