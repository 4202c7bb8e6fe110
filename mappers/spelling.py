"""`did you mean …?`: the one suggestion for a misspelt name, wherever a spec names something from a known set.

Spec keys and enum values (the loader), transforms in templates, families a column uses but
`target.families` does not declare, attributes the sample does not have (the checks) all ask
here, so every suggestion reads and matches the same way. Standard library only.
"""

from __future__ import annotations

import difflib
from typing import Iterable


def did_you_mean(word: object, choices: Iterable[str]) -> str:
    """`did you mean 'x'?` for the choice closest to a misspelt ``word`` (case ignored), or ''."""
    if not isinstance(word, str):
        return ""
    by_lower = {choice.lower(): choice for choice in choices}
    close = difflib.get_close_matches(word.lower(), by_lower, n=1, cutoff=0.6)
    return f"did you mean {by_lower[close[0]]!r}?" if close else ""
