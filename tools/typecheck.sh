#!/usr/bin/env bash
# mypy over the package as it is installed: ddb2bt.mappers, ddb2bt.pipelines, ... are the top-level folders
# mapped by pyproject's package-dir, which mypy cannot follow through the editable install's import hook.
# A folder of symlinks gives it the installed layout; the settings are pyproject's [tool.mypy].
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
TREE=.cache/typecheck/ddb2bt
mkdir -p "$TREE"
: >"$TREE/__init__.py"
# The package folders as pyproject.toml maps them (its [tool.setuptools.package-dir]: the one list of them).
FOLDERS=$(.venv/bin/python -c 'import tomllib; print(*tomllib.load(open("pyproject.toml", "rb"))["tool"]["setuptools"]["package-dir"].values())')
for package in $FOLDERS; do
  ln -sfn "../../../$package" "$TREE/$package"
done
MYPYPATH=.cache/typecheck exec .venv/bin/python -m mypy -p ddb2bt "$@"
