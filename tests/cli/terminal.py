"""`ddb2bt` on a pseudo-terminal, read as a person sees it (the progress bar, the prompt, Ctrl-C)."""

import fcntl
import os
import pty
import re
import select
import struct
import termios
import time
from pathlib import Path

ANSI = re.compile(rb"\x1b\[[0-9;?]*[A-Za-z]")


class Terminal:
    """A command on a pseudo-terminal (its own session, so Ctrl-C reaches its whole process group, as in a shell)."""

    def __init__(self, args: list[str], env: dict[str, str], cwd: Path) -> None:
        self.pid, self.fd = pty.fork()
        if self.pid == 0:  # the child: exec at once
            os.chdir(cwd)
            os.execve(args[0], args, env)
        fcntl.ioctl(self.fd, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 160, 0, 0))
        self.output = b""
        self.code: int | None = None

    def read(self, timeout: float = 0.2) -> bytes:
        ready, _, _ = select.select([self.fd], [], [], timeout)
        if not ready:
            return b""
        try:
            data = os.read(self.fd, 65536)
        except OSError:  # EIO: the child closed the terminal
            return b""
        self.output += data
        return data

    def text(self) -> str:
        return ANSI.sub(b"", self.output).decode(errors="replace").replace("\r", "\n")

    def expect(self, pattern: str, timeout: float = 60) -> re.Match:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            found = re.search(pattern, self.text())
            if found:
                return found
            if not self.read() and self._exited():
                break
        raise AssertionError(f"{pattern!r} not seen; output:\n{self.text()[-3000:]}")

    def send(self, data: bytes) -> None:
        os.write(self.fd, data)

    def wait(self, timeout: float = 90) -> int:
        deadline = time.monotonic() + timeout
        while not self._exited():
            self.read()
            if time.monotonic() > deadline:
                os.kill(self.pid, 9)
                raise AssertionError(f"still running after {timeout} s:\n{self.text()[-3000:]}")
        while self.read(0.05):  # what is left in the terminal's buffer
            pass
        os.close(self.fd)
        assert self.code is not None
        return self.code

    def _exited(self) -> bool:
        if self.code is None:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                self.code = os.waitstatus_to_exitcode(status)
        return self.code is not None
