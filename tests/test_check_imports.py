"""tools/check_imports.py, run by `make test`: it finds what it is there to find."""

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
spec = importlib.util.spec_from_file_location("check_imports", ROOT / "tools" / "check_imports.py")
check_imports = importlib.util.module_from_spec(spec)
spec.loader.exec_module(check_imports)


def _tree(tmp_path: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return tmp_path


def test_the_project_itself_is_clean():
    assert check_imports.check() == []


def test_a_cycle_an_upward_import_and_an_impure_mapper_are_found(tmp_path):
    root = _tree(tmp_path, {
        "mappers/a.py": "from . import b\nimport requests\n",
        "mappers/b.py": "def f():\n    from .a import x\n",  # a deferred import still closes the cycle
        "mappers/c.py": "from ddb2bt.app import runs\n",
        "app/runs.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from ..cli import main\n",
        "cli/main.py": "",
    })
    found = check_imports.check(root)
    assert "import cycle: ddb2bt.mappers.a -> ddb2bt.mappers.b -> ddb2bt.mappers.a" in found
    assert any("mappers/ is pure but imports requests" in line for line in found)
    assert any("mappers/ imports upward from app/" in line for line in found)
    assert not any("app/runs.py" in line for line in found)  # a TYPE_CHECKING import is no dependency


def test_test_modules_and_benchmarks_keep_to_their_side(tmp_path):
    root = _tree(tmp_path, {
        "tests/test_a.py": "from .test_b import helper\n",
        "tests/test_b.py": "",
        "tests/support.py": "",
        "tests/test_c.py": "from .support import x\n",
        "benchmarks/run.py": "from tests.support import x\n",
    })
    found = check_imports.check(root)
    assert any("tests/test_a.py:1: a test module imports another test module" in line for line in found)
    assert not any("test_c.py" in line for line in found)
    assert any("benchmarks import from tests/" in line for line in found)
