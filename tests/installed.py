"""The installed `ddb2bt` command (the venv's entry point beside the interpreter running the tests)."""

import sys
from pathlib import Path

DDB2BT = str(Path(sys.executable).parent / "ddb2bt")
