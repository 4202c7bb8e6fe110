"""moto's in-process mock (``mock_aws``) under the tests' net.

The mock answers requests addressed to AWS's own host names inside this process; the net
(``AWS_ENDPOINT_URL=http://127.0.0.1:9``, tests/conftest.py) would send them to a closed port
instead. So the net is lifted while the mock is on: nothing leaves the process then, whatever the
endpoint rule does. Tests of the endpoint rule itself use moto_server or dynalite, with the net on.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator

from moto import mock_aws as _mock_aws


@contextlib.contextmanager
def mock_aws() -> Iterator[None]:
    saved = os.environ.pop("AWS_ENDPOINT_URL", None)
    try:
        with _mock_aws():
            yield
    finally:
        if saved is not None:
            os.environ["AWS_ENDPOINT_URL"] = saved
