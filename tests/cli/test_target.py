"""Tests of ``accelopt target check`` (accelopt_cli.target) on this machine's local target, and of
its probe kernels, which ship as package data (``accelopt_core/onsite/probes/``).

The same command over a real loopback sshd: tests/targets/test_ssh_target.py::test_target_check_cli.
"""

from __future__ import annotations

import argparse
import io
import json
from pathlib import Path

import pytest
from rich.console import Console

from accelopt_cli.target import PROBES, add_target_parser, check_target, probe_source
from accelopt_cli.target import run_target_command as run_target
from accelopt_core.kernelfile import parse_kernel_file
from accelopt_core.settings import Settings
from accelopt_core.targets.shipping import onsite_sources

ROOT = Path(__file__).resolve().parents[2]
PROBES_DIR = ROOT / "accelopt_core" / "onsite" / "probes"


@pytest.mark.parametrize("backend", sorted(PROBES))
def test_probes_are_kernel_files_with_complete_harnesses(backend: str) -> None:
    name, entry = PROBES[backend]
    source = probe_source(backend)
    assert source == (PROBES_DIR / name).read_text("utf-8")
    kf = parse_kernel_file(source, name)
    assert kf.backend == backend
    assert kf.diagnostics == [], kf.diagnostics
    assert kf.harness is not None and kf.harness.complete
    assert kf.harness.entry == entry
    assert kf.harness.has_flops and kf.harness.has_bytes


def test_probes_are_package_data_not_shipped_modules() -> None:
    assert not (PROBES_DIR / "__init__.py").exists()
    modules, packages = onsite_sources()
    assert not any("probes" in name for name in modules), sorted(modules)
    assert not any("probes" in name for name in packages)
    pyproject = (ROOT / "pyproject.toml").read_text("utf-8")
    assert '"accelopt_core.onsite" = ["probes/*.py"]' in pyproject
    with pytest.raises(KeyError):
        probe_source("cuda")


async def test_check_target_local_runs_the_triton_probe() -> None:
    report = await check_target(Settings(), timeout_s=120)
    assert report["ok"], report.get("error")
    assert list(report)[:2] == ["target", "ok"] and report["target"] == "local"
    assert report["kernel"] == "triton" and report["result"]["status"] == "ok"
    assert report["info"]["triton"] and report["info"]["device_names"]
    assert report["summary"].endswith(report["result"]["timing"])


def test_check_target_unknown_target_is_a_report_not_a_traceback(capsys) -> None:
    settings = Settings().model_copy(update={"target": "nowhere://x"})
    out, err = io.StringIO(), io.StringIO()
    args = _parse(["target", "check"])
    code = run_target(args, settings, out=Console(file=out), err=Console(file=err))
    assert code == 1
    assert "target nowhere://x" in out.getvalue()
    assert "error:" in err.getvalue() and "unknown target" in err.getvalue()
    assert run_target(_parse(["target", "check", "--json"]), settings) == 1
    report = json.loads(capsys.readouterr().out)
    assert report["ok"] is False and report["target"] == "nowhere://x"
    assert "unknown target" in report["error"] and "result" not in report


def _parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="accelopt")
    add_target_parser(parser.add_subparsers(dest="command", required=True))
    return parser.parse_args(argv)
