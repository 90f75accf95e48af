"""The CLI reads the project file and the user config (accelopt_core.configfiles), and
``accelopt config`` shows the effective settings: the real ``accelopt`` in subprocesses, on real
files in temp directories (``$ACCELOPT_CONFIG`` points at a temp file: tests/cli/conftest.py)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SOFTMAX = ROOT / "examples" / "triton" / "softmax.py"


def accelopt(*args: str, cwd: Path, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """``accelopt ARGS`` as a user runs it, stdout and stderr pipes."""
    # wide enough that the source column keeps a temporary path (an xdist worker's is longer)
    # on one line
    env = {**os.environ, "COLUMNS": "400", "ACCELOPT_SHAPE": "small"}
    return subprocess.run(
        [sys.executable, "-m", "accelopt_cli.main", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A project whose kernel sits two directories below its pyproject.toml."""
    root = tmp_path / "repo"
    (root / "pkg" / "ops").mkdir(parents=True)
    (root / "pkg" / "ops" / "softmax.py").write_text(SOFTMAX.read_text())
    return root


def write_pyproject(root: Path, table: str) -> Path:
    path = root / "pyproject.toml"
    path.write_text(f'[project]\nname = "kernels"\n\n{table}')
    return path


def settings_of(proc: subprocess.CompletedProcess[str]) -> dict[str, tuple[object, str]]:
    assert proc.returncode == 0, proc.stderr
    return {
        row["key"]: (row["value"], row["source"]) for row in json.loads(proc.stdout)["settings"]
    }


def test_config_shows_each_layer_and_its_source(project: Path, user_config: Path, tmp_path: Path):
    user_config.write_text('target = "ray:auto"\n[search]\niterations = 7\nbeamWidth = 2\n')
    pyproject = write_pyproject(
        project, "[tool.accelopt.search]\nbeamWidth = 3\nsamplesPerPlan = 2\n"
    )
    extra = tmp_path / "extra.json"
    extra.write_text(json.dumps({"accelopt.search.samplesPerPlan": 4}))
    kernel = project / "pkg" / "ops" / "softmax.py"
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()

    proc = accelopt(
        "config",
        str(kernel),
        "--settings",
        str(extra),
        "--json",
        "--target",
        "local",
        cwd=elsewhere,
    )
    rows = settings_of(proc)
    assert rows["target"] == ("local", "command line")
    assert rows["search.samplesPerPlan"] == (4, f"settings file {extra}")
    assert rows["search.beamWidth"] == (3, f"project file {pyproject}")
    assert rows["search.iterations"] == (7, f"user config {user_config}")
    assert rows["search.plansPerCandidate"] == (2, "default")
    files = json.loads(proc.stdout)["files"]
    assert files == [
        {"layer": "user config", "path": str(user_config)},
        {"layer": "project file", "path": str(pyproject)},
        {"layer": "settings file", "path": str(extra)},
    ]
    assert proc.stderr == ""

    # without a path, the project file is found from the working directory (here: a subfolder)
    table = accelopt("config", cwd=project / "pkg")
    assert table.returncode == 0, table.stderr
    line = next(ln for ln in table.stdout.splitlines() if "search.beamWidth" in ln)
    assert "3" in line and str(pyproject) in line
    assert f"read project file: {pyproject}" in table.stdout
    assert f"read user config: {user_config}" in table.stdout


def test_config_reports_a_bad_value_once_located_and_exits_0(project: Path, user_config: Path):
    user_config.write_text("[search]\nbeamWidth = 5\n")
    pyproject = write_pyproject(project, "[tool.accelopt.search]\nbeamWidth = -4\n")
    proc = accelopt("config", "--json", cwd=project)
    rows = settings_of(proc)
    assert rows["search.beamWidth"] == (5, f"user config {user_config}")  # the lower layer applies
    warnings = [ln for ln in proc.stderr.splitlines() if "warning:" in ln]
    assert len(warnings) == 1, proc.stderr
    (warning,) = warnings  # one line: file, key, why, the default
    assert str(pyproject) in warning and "accelopt.search.beamWidth" in warning
    assert "greater than or equal to 1" in warning and "using the default 2" in warning
    (issue,) = json.loads(proc.stdout)["issues"]
    assert issue.startswith(
        f"{pyproject} [tool.accelopt]: Invalid setting accelopt.search.beamWidth"
    )


def test_toml_syntax_error_is_located(project: Path):
    (project / "accelopt.toml").write_text("[search\nbeamWidth = 3\n")
    proc = accelopt("config", "--json", cwd=project)
    assert settings_of(proc)["search.beamWidth"] == (2, "default")
    assert str(project / "accelopt.toml") in proc.stderr and "line 1" in proc.stderr


def test_secrets_are_never_printed(project: Path):
    write_pyproject(
        project,
        '[tool.accelopt.llm]\nmodel = "m"\napiKey = "sk-do-not-print"\ntoken = "t0ps3cret"\n',
    )
    for args in (["config"], ["config", "--json"]):
        proc = accelopt(*args, cwd=project)
        assert proc.returncode == 0, proc.stderr
        assert "sk-do-not-print" not in proc.stdout + proc.stderr
        assert "t0ps3cret" not in proc.stdout + proc.stderr
    assert settings_of(accelopt("config", "--json", cwd=project))["llm.model"][0] == "m"


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_profile_uses_the_project_file_of_the_kernel_not_of_the_working_directory(
    project: Path, tmp_path: Path
):
    port = closed_port()
    write_pyproject(
        project,
        f'[tool.accelopt]\ntarget = "ssh://nobody@127.0.0.1:{port}"\n\n'
        "[tool.accelopt.ssh]\nconnectTimeoutS = 2\n\n[tool.accelopt.search]\nbeamWidth = 0\n",
    )
    cwd = tmp_path / "other"
    cwd.mkdir()
    (cwd / "accelopt.toml").write_text('target = "ray:auto"\n')  # not the kernel's project
    proc = accelopt("profile", str(project / "pkg" / "ops" / "softmax.py"), cwd=cwd)
    assert proc.returncode == 1
    said = " ".join((proc.stdout + proc.stderr).split())
    assert "TargetError" in said and "127.0.0.1" in said and str(port) in said, said
    assert "ray" not in proc.stderr.lower()
    assert proc.stderr.count("accelopt.search.beamWidth") == 1  # reported once, located
    assert "Traceback" not in proc.stderr
