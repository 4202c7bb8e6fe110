"""The Dataflow image, read statically (no docker here): pinned bases, the repo's own package, a small context.

templates/flex/Dockerfile is parsed into its instructions; /.dockerignore is applied to this
checkout with Docker's matching rules (a pattern excludes a path it matches or any folder above it;
the last matching pattern wins; `!` re-includes), and the context that results is what the image
may see.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = ROOT / "templates" / "flex" / "Dockerfile"
DIGEST = re.compile(r"@sha256:[0-9a-f]{64}$")


def instructions(path: Path = DOCKERFILE) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) in order, continuation lines joined, comments dropped."""
    lines, current = [], ""
    for raw in path.read_text().splitlines():
        if not current and (not raw.strip() or raw.lstrip().startswith("#")):
            continue
        current += raw.rstrip()
        if current.endswith("\\"):
            current = current[:-1] + " "
            continue
        lines.append(current.strip())
        current = ""
    return [(line.split(None, 1)[0].upper(), line.split(None, 1)[1] if " " in line else "") for line in lines]


def froms() -> list[tuple[str, str | None]]:
    """(image reference, stage name) of each FROM."""
    found = []
    for name, args in instructions():
        if name == "FROM":
            words = args.split()
            found.append((words[0], words[2] if len(words) == 3 and words[1].upper() == "AS" else None))
    return found


def build_args() -> dict[str, str]:
    return dict(args.split("=", 1) for name, args in instructions() if name == "ARG" and "=" in args)


def test_every_base_image_is_pinned_by_digest_and_none_is_latest():
    images = froms()
    assert len(images) == 2
    for image, _ in images:
        assert DIGEST.search(image), f"{image} is not pinned by digest"
        assert ":latest" not in image and "$" not in image
    assert "latest" not in " ".join(args for name, args in instructions() if name in ("FROM", "COPY"))


def test_the_workers_base_is_beams_sdk_image_at_a_release_pyproject_allows():
    (launcher, stage), (sdk, _) = froms()
    assert launcher.startswith("gcr.io/dataflow-templates-base/python311-template-launcher-base@")
    repository, tag = sdk.split("@")[0].rsplit(":", 1)
    assert repository == "apache/beam_python3.11_sdk"  # the same Python (3.11) as the launcher base
    assert build_args()["BEAM_VERSION"] == tag  # the pip install holds Beam at the SDK image's own release
    beam = next(Requirement(r) for r in tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
                if r.startswith("apache-beam"))
    assert Version(tag) in beam.specifier, (tag, str(beam.specifier))
    copies = [args for name, args in instructions() if name == "COPY" and args.startswith("--from=")]
    assert copies == [f"--from={stage} /opt/google/dataflow/python_template_launcher "
                      "/opt/google/dataflow/python_template_launcher"]


def copied() -> dict[str, str]:
    """Path in the image -> path in the repository, for every COPY from the build context."""
    workdir, mapping = "/", {}
    for name, args in instructions():
        if name == "WORKDIR":
            workdir = args
        if name == "COPY" and not args.startswith("--"):
            *sources, target = shlex.split(args)
            target = target if target.startswith("/") else f"{workdir.rstrip('/')}/{target}"
            for source in sources:
                if target.endswith("/") and len(sources) > 1 or (ROOT / source).is_file() and target.endswith("/"):
                    mapping[target.rstrip("/") + "/" + Path(source).name] = source
                else:
                    mapping[target.rstrip("/")] = source
    return mapping


def in_repository(image_path: str) -> Path | None:
    for inside, source in copied().items():
        if image_path == inside or image_path.startswith(inside + "/"):
            return ROOT / source / image_path[len(inside):].lstrip("/")
    return None


def test_the_image_installs_the_package_from_the_repository():
    mapping = copied()
    assert {"pyproject.toml", "README.md", "mappers", "pipelines", "app", "cli", "templates"} <= set(mapping.values())
    packages = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-dir"].values()
    assert set(packages) <= set(mapping.values())  # every package folder pyproject.toml builds is copied
    project_dir = str(Path(next(k for k, v in mapping.items() if v == "pyproject.toml")).parent)
    runs = [args for name, args in instructions() if name == "RUN"]
    install = next(r for r in runs if "pip install" in r)
    words = shlex.split(install.split("&&")[0])
    assert project_dir in words  # pip install of the checkout (its pyproject.toml): the repo's own packaging
    assert "pip check" in install


def test_the_flex_launcher_files_exist_and_nothing_is_installed_at_start():
    env = {}
    for name, args in instructions():
        if name == "ENV":
            key, _, value = args.partition("=")
            env[key] = value.strip('"')
    py_file = in_repository(env["FLEX_TEMPLATE_PYTHON_PY_FILE"])
    assert py_file is not None and py_file.is_file() and py_file == ROOT / "templates" / "flex" / "main.py"
    # a setup or requirements file would make the launcher pip-install and stage a package for the workers
    assert not {"FLEX_TEMPLATE_PYTHON_SETUP_FILE", "FLEX_TEMPLATE_PYTHON_REQUIREMENTS_FILE",
                "FLEX_TEMPLATE_PYTHON_EXTRA_PACKAGES"} & set(env)
    assert env["PIP_NO_INDEX"] == "1"
    entrypoint = [json.loads(args) for name, args in instructions() if name == "ENTRYPOINT"]
    assert entrypoint == [["/opt/apache/beam/boot"]]  # the workers start with Beam's boot program


# --- .dockerignore ----------------------------------------------------------------------------------------------


def _pattern_regex(pattern: str) -> re.Pattern[str]:
    out, i = "", 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out, i = out + "(?:.*/)?", i + 3
        elif pattern.startswith("**", i):
            out, i = out + ".*", i + 2
        elif pattern[i] == "*":
            out, i = out + "[^/]*", i + 1
        elif pattern[i] == "?":
            out, i = out + "[^/]", i + 1
        else:
            out, i = out + re.escape(pattern[i]), i + 1
    return re.compile(out)


def dockerignore() -> list[tuple[bool, re.Pattern[str]]]:
    rules = []
    for line in (ROOT / ".dockerignore").read_text().splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        negated = line.startswith("!")
        rules.append((negated, _pattern_regex(os.path.normpath(line.lstrip("!")).lstrip("/"))))
    return rules


def excluded(path: str, rules=None) -> bool:
    """Docker's rule: the last pattern that matches the path, or a folder above it, decides."""
    rules = dockerignore() if rules is None else rules
    parts = path.split("/")
    verdict = False
    for negated, regex in rules:
        if any(regex.fullmatch("/".join(parts[:n])) for n in range(1, len(parts) + 1)):
            verdict = not negated
    return verdict


@pytest.mark.parametrize("path", [".venv/lib/python3.11/site-packages/apache_beam/__init__.py", ".git/HEAD",
                                  "out/report.html", "runs/videos-20260101T000000Z/checkpoint.json",
                                  ".cache/mypy/3.11/cache.db", ".pytest_cache/v/cache/nodeids", ".hypothesis/x",
                                  "mappers/__pycache__/spec.cpython-311.pyc", "tools/node/node_modules/dynalite/x.js",
                                  "tests/pipelines/test_pipeline_e2e.py", "benchmarks/results/run.json",
                                  "build/lib/x.py", "dist/ddb2bt-0.1.0.tar.gz", "ddb2bt.egg-info/PKG-INFO"])
def test_the_context_leaves_out(path):
    assert excluded(path)


def test_the_context_holds_what_the_dockerfile_copies():
    for source in copied().values():
        assert not excluded(source), source
        for file in (ROOT / source).rglob("*.py") if (ROOT / source).is_dir() else ():
            relative = file.relative_to(ROOT).as_posix()
            assert "__pycache__" in relative or not excluded(relative), relative


def test_the_context_of_this_checkout_is_small():
    """Walk this very checkout as Docker would send it: no venv, no VCS, nothing big."""
    rules, total, files = dockerignore(), 0, []
    for folder, subfolders, names in os.walk(ROOT):
        relative_folder = Path(folder).relative_to(ROOT).as_posix()
        relative_folder = "" if relative_folder == "." else relative_folder + "/"
        subfolders[:] = [d for d in subfolders if not excluded(relative_folder + d, rules)]
        for name in names:
            path = relative_folder + name
            if not excluded(path, rules):
                files.append(path)
                total += (Path(folder) / name).stat().st_size
    assert not [f for f in files if f.startswith((".venv/", ".git/", "tests/", "runs/", "out/"))]
    assert "pyproject.toml" in files and "templates/flex/main.py" in files
    assert total < 5_000_000, f"{total} bytes in the build context"
