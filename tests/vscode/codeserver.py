"""A real VS Code for the end-to-end test: code-server (VS Code served to a browser) with the
packaged extension installed, and Debian's headless Chromium driven by Playwright.

Where things are comes from the environment that ``.ci/vscode-e2e`` sets:
``ACCELOPT_CODE_SERVER`` (the command line that starts code-server), ``ACCELOPT_CHROMIUM`` (the
browser), ``ACCELOPT_VSIX`` (the packaged extension).
"""

from __future__ import annotations

import json
import os
import shlex
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

#: Seconds code-server keeps a closed window's extension host for a reconnection.
GRACE_S = 5


def free_port() -> int:
    """A free TCP port on 127.0.0.1."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class CodeServer:
    """One code-server on 127.0.0.1 with its own user data and extensions directories.

    Args:
        home: a fresh directory (user data, extensions, logs go under it).
        settings: the user settings (``settings.json``).
    """

    def __init__(self, home: Path, settings: dict) -> None:
        self.home = home
        self.command = shlex.split(os.environ["ACCELOPT_CODE_SERVER"])
        self.user_data = home / "user-data"
        self.extensions = home / "extensions"
        (self.user_data / "User").mkdir(parents=True)
        (self.user_data / "User" / "settings.json").write_text(json.dumps(settings, indent=1))
        self.port = free_port()
        self.proc: subprocess.Popen | None = None
        self.log = home / "code-server.log"

    def _base(self) -> list[str]:
        return [
            *self.command,
            "--user-data-dir", str(self.user_data),
            "--extensions-dir", str(self.extensions),
        ]  # fmt: skip

    def install(self, vsix: str) -> None:
        """``code-server --install-extension VSIX``. Raises CalledProcessError on failure."""
        subprocess.run(
            [*self._base(), "--install-extension", vsix],
            check=True, capture_output=True, timeout=120,
        )  # fmt: skip

    def start(self) -> None:
        """Start serving (no authentication, loopback only) and wait until it answers."""
        env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
        self.proc = subprocess.Popen(
            [
                *self._base(),
                "--auth", "none",
                "--bind-addr", f"127.0.0.1:{self.port}",
                "--disable-telemetry", "--disable-update-check",
                "--disable-workspace-trust", "--disable-getting-started-override",
                "--reconnection-grace-time", str(GRACE_S),
            ],
            stdout=self.log.open("wb"), stderr=subprocess.STDOUT, env=env,
            start_new_session=True,
        )  # fmt: skip
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{self.port}/healthz", timeout=2)
                return
            except OSError:
                if self.proc.poll() is not None:
                    log = self.log.read_text()[-2000:]
                    raise RuntimeError(f"code-server exited: {log}") from None
                time.sleep(0.3)
        raise TimeoutError(f"code-server did not answer: {self.log.read_text()[-2000:]}")

    def url(self, folder: Path) -> str:
        """The address that opens ``folder`` in a new window."""
        return f"http://127.0.0.1:{self.port}/?folder={folder}"

    def stop(self) -> None:
        """Stop code-server and everything it started (its own process group)."""
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, 15)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, 9)
                self.proc.wait(5)


def server_pids(root: int) -> set[int]:
    """The ``accelopt_server`` processes among the descendants of process ``root``."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(ppid, []).append(int(entry.name))
    found, todo = set(), [root]
    while todo:
        pid = todo.pop()
        for child in children.get(pid, []):
            todo.append(child)
            try:
                cmd = (Path("/proc") / str(child) / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if b"accelopt_server" in cmd or any(c.endswith(b"accelopt-lsp") for c in cmd):
                found.add(child)
    return found
