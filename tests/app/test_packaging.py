"""The package Dataflow workers get: `--setup_file pyproject.toml` builds from a fresh install, offline.

Beam's stager runs `python -m build --no-isolation --sdist` on the setup file's folder, so
everything the build needs must come with ddb2bt's own install (nothing may be fetched). The
test makes that sdist the way the stager does, from a copy of the project's files, with every
package index switched off, then installs it (no dependencies, no index) into a fresh folder and
imports the modules a worker runs.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PROJECT_FILES = ("pyproject.toml", "README.md", "mappers", "pipelines", "app", "cli", "templates")
OFFLINE = {"PIP_NO_INDEX": "1", "PIP_INDEX_URL": "http://127.0.0.1:9/", "PIP_DISABLE_PIP_VERSION_CHECK": "1"}


@pytest.fixture(scope="module")
def sdist(tmp_path_factory):
    from apache_beam.runners.portability.stager import Stager

    project = tmp_path_factory.mktemp("project")
    for name in PROJECT_FILES:
        source = ROOT / name
        if source.is_dir():
            shutil.copytree(source, project / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        else:
            shutil.copy(source, project / name)
    out = tmp_path_factory.mktemp("staging")
    saved = {key: os.environ.get(key) for key in OFFLINE}
    os.environ.update(OFFLINE)
    try:
        # The stager's own build step (private; Beam is pinned <3 in pyproject.toml): what `--setup_file` runs.
        return Path(Stager._build_setup_package(str(project / "pyproject.toml"), str(out)))
    finally:
        for key, value in saved.items():
            os.environ.pop(key) if value is None else os.environ.__setitem__(key, value)


def test_the_sdist_holds_every_package_and_the_flex_files(sdist):
    with tarfile.open(sdist) as archive:
        names = {name.split("/", 1)[1] for name in archive.getnames() if "/" in name}
    for folder in ("mappers", "pipelines", "app", "cli", "cli/commands", "templates"):
        assert f"{folder}/__init__.py" in names, folder
    assert {"templates/flex/main.py", "templates/flex/metadata.json", "templates/seeds/videos.jsonl"} <= names
    assert "pipelines/bigtable/_wire.c" in names  # compiled where the package is installed
    import tomllib

    modules = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["ext-modules"]
    assert {source for module in modules for source in module["sources"]} <= names  # every compiled module's C
    assert {header for module in modules for header in module.get("depends", ())} <= names  # and headers
    assert "mappers/_tuple_subclass.h" in names  # shared by _json.c and _rows.c
    assert not [name for name in names if name.endswith(".so")]  # never this machine's build


def test_the_sdist_installs_offline_and_a_worker_can_import_it(sdist, tmp_path):
    site = tmp_path / "site"
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-index", "--no-build-isolation",
         "--target", str(site), str(sdist)],
        check=True, env={**os.environ, **OFFLINE}, capture_output=True, text=True, timeout=300,
    )
    probe = ("import ddb2bt.pipelines.pipeline, ddb2bt.mappers.compiler, ddb2bt.app.migrate, ddb2bt.templates as t;"
             "import pathlib; print(pathlib.Path(t.__file__).parent);"
             "from ddb2bt.pipelines.bigtable import _wire; print(_wire.__file__)")
    found = subprocess.run([sys.executable, "-c", probe], env={**os.environ, "PYTHONPATH": str(site)}, cwd=tmp_path,
                           check=True, capture_output=True, text=True, timeout=120)
    templates, wire = found.stdout.split()
    assert Path(templates) == site / "ddb2bt" / "templates"  # the installed copy, not the checkout
    assert Path(wire).parent == site / "ddb2bt" / "pipelines" / "bigtable"  # compiled by the install (gcc here)
    assert (site / "ddb2bt" / "mappers" / "spec.schema.json").is_file()
    assert (site / "ddb2bt" / "templates" / "flex" / "metadata.json").is_file()


def test_setup_reinstalls_when_any_compiled_modules_source_changes():
    """tools/setup.sh rebuilds the venv's install when a C source or a header it includes changes: every
    ext-module's sources and depends must be among the files its stamp digests (found by the same globs), or a
    changed module would keep its old build; and every header a module includes from this project is in its
    depends."""
    import glob
    import re
    import tomllib

    modules = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["ext-modules"]
    sources = {source for module in modules for source in (*module["sources"], *module.get("depends", ()))}
    for module in modules:  # a header of ours included by a module's C is in its depends
        for source in module["sources"]:
            for header in re.findall(r'#include "([^"]+)"', (ROOT / source).read_text()):
                found = [f"{folder}/{header}" for folder in (Path(source).parent.as_posix(),
                                                             *module.get("include-dirs", ()))
                         if (ROOT / folder / header).is_file()]
                assert found and found[0] in module.get("depends", ()), (module["name"], header)
    globs = re.search(r"BUILD_INPUTS=\(([^)]*)\)", (ROOT / "tools" / "setup.sh").read_text()).group(1).split()
    digested = {path for pattern in globs for path in glob.glob(pattern, root_dir=ROOT)}
    assert sources and sources <= digested
