"""``accelopt target check`` reports the NKI SDK and runs the NKI probe (simulated here): on the
local target and over the real loopback sshd, with the NKI test double as the target's SDK."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

from rich.console import Console

from accelopt_cli.render_target import print_target_report
from tests.nki.conftest import DOUBLES, double_env
from tests.remote_fixtures import LoopbackSSHD, sshd  # noqa: F401

CMD = [sys.executable, "-m", "accelopt_cli.main", "target", "check"]


def _assert_nki_reported(report: dict) -> None:
    assert report["ok"] and report["kernel"] == "triton", report.get("error")
    assert report["sdk"] == {"api": "nki", "version": "0.3.0+double"}
    nki = report["nki"]
    assert nki["ok"] and nki["result"]["timing"] == "simulated", nki["summary"]
    assert nki["summary"].endswith("correct · simulated")


def test_target_check_local_reports_the_nki_sdk(tmp_path: Path) -> None:
    env = double_env(ACCELOPT_MEMORY_DIR=str(tmp_path / "mem"))
    proc = subprocess.run([*CMD, "--json"], capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    _assert_nki_reported(report)
    # the human form of the same report (the CLI prints it with this function without --json)
    out, err = io.StringIO(), io.StringIO()
    print_target_report(Console(file=out, width=200), Console(file=err, width=200), report)
    assert "NKI SDK: nki 0.3.0+double" in out.getvalue()
    assert "check kernel (nki add): " in out.getvalue() and "simulated" in out.getvalue()


def test_target_check_over_ssh_reports_the_nki_sdk(sshd: LoopbackSSHD, tmp_path: Path) -> None:  # noqa: F811
    # The remote python: this interpreter with the NKI double on its path (sshd passes no env).
    python = tmp_path / "python-with-nki"
    python.write_text(f'#!/bin/sh\nPYTHONPATH="{DOUBLES}" exec "{sys.executable}" "$@"\n')
    python.chmod(0o755)
    settings = tmp_path / "settings.json"
    ssh = {
        "python": str(python),
        "identityFile": str(sshd.identity_file),
        "knownHosts": str(sshd.known_hosts),
    }
    settings.write_text(json.dumps({"accelopt": {"ssh": ssh}}))
    env = dict(os.environ, ACCELOPT_MEMORY_DIR=str(tmp_path / "mem"))
    proc = subprocess.run(
        [*CMD, sshd.url, "--settings", str(settings), "--json"],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["target"] == sshd.url
    _assert_nki_reported(report)
