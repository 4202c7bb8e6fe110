"""The compiled twins (pyproject.toml's optional ext-modules): whether this machine could build them."""

import shutil
import sysconfig

import pytest


def require_built(module: object, where: str) -> None:
    """Fail if the compiled module (``module``, None when its import failed) is missing where a C compiler is at hand:
    its tests would otherwise test only the Python function; skip where none is (the Python function serves)."""
    compiler = (sysconfig.get_config_var("CC") or "cc").split()[0]
    if shutil.which(compiler) is None:
        pytest.skip(f"no C compiler ({compiler}): the Python function serves")
    assert module is not None, f"{where} not built: pip install -e . again"
