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
for package in mappers pipelines app cli templates; do
  ln -sfn "../../../$package" "$TREE/$package"
done
MYPYPATH=.cache/typecheck exec .venv/bin/python -m mypy -p ddb2bt "$@"
