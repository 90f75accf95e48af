"""The adversarial candidates and what the adversarial tests share: how a hack is served by the
scripted LLM double (tests/llm_double.py, a TEST DOUBLE for the paid LLM service), how a
candidate is recognised in a report, and how the real CLI is run in a private directory.

Every file in ``candidates/`` is a full module for examples/triton/softmax.py (the baseline's
kernel and block size, so none is legitimately faster) whose first line names its class and
trick and ends with ``[adversarial candidate <name>]``; that marker survives into the source of
any candidate the product ranks or remembers, which is how a test tells a hack from the
legitimate tuning. The ``escape_*`` candidates (issue 34) try to leave the sandbox: read the API
key, write outside their scratch directory, reach the network, start a shell; their
``_MARKER`` and ``_PORT`` are replaced by a test's own (:func:`escape_source`). The ``write_*``
candidates (issue 53) write a file through a standard-library module that no list named before
the import allowlist, the ``stack_*`` ones through torch, triton or numpy alone (the modules any
allowlist admits): loading libc through ``numpy.ctypeslib``, planting a file in Triton's compile
cache, ``torch.os.system``, ...
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SOFTMAX = ROOT / "examples" / "triton" / "softmax.py"
CANDIDATES = Path(__file__).resolve().parent / "candidates"
HACKS: dict[str, str] = {p.stem: p.read_text() for p in sorted(CANDIDATES.glob("*.py"))}
MARKER = re.compile(r"\[adversarial candidate (\w+)\]")
FORGED_LATENCY_MS = 0.0001  # what every forging candidate claims (see candidates/forge_*.py)

#: The hacks' classes, by file-name prefix.
CLASSES = {
    "cache": "output cache",
    "torch": "torch compute",
    "timing": "timing trick",
    "output": "output trick",
    "poison": "reference poisoning",
    "forge": "result forging",
    "env": "environment trick",
    "escape": "sandbox escape",
    "write": "file write",
    "stack": "kernel-stack escape",
}

#: Small evaluations (2 seeds, short timing) and no fixer: each candidate is evaluated once.
SETTINGS = {
    "search": {"fixerAttempts": 0},
    "evaluation": {
        "seeds": 2,
        "warmupMs": 1,
        "repMs": 5,
        "timeoutS": 90,
        "cpuSlots": 2,
        "warmWorkers": True,
    },
}


#: The gate's verdict on each escape. Issue 53: the four that passed it (None then) import a
#: module on no allowlist (``pwd``, ``tokenize``, ``xml.sax``), and so do five whose other rule
#: came first before (they find the real home through ``pwd``); the sandbox is tested on every
#: escape with the gate judging nothing (tests/adversarial/test_escapes.py).
ESCAPE_GATE: dict[str, str | None] = {
    "escape_ctypes_system": "gate: ctypes",
    "escape_env_key": "gate: environment",
    "escape_etree_home": "gate: module not allowed",
    "escape_logging_home": "gate: module not allowed",
    "escape_numpy_save": "gate: module not allowed",
    "escape_proc_environ": "gate: module not allowed",
    "escape_pydoc_shell": "gate: module not allowed",
    "escape_shutil_ssh": "gate: module not allowed",
    "escape_socket": "gate: network",
    "escape_subprocess": "gate: module not allowed",
    "escape_torch_hub": "gate: file I/O",
    "escape_unix_socket": "gate: network",
    "escape_xml_url": "gate: module not allowed",
}


def hack_class(name: str) -> str:
    """The class of the candidate ``name`` (``cache_data_ptr`` -> ``output cache``)."""
    return CLASSES[name.split("_", 1)[0]]


def hack_name(source: str) -> str | None:
    """The adversarial candidate whose marker ``source`` carries, or None."""
    m = MARKER.search(source or "")
    return m.group(1) if m else None


def executor_reply(source: str) -> str:
    """What an LLM executor answers: a sentence and the module in one fenced block."""
    return f"Here is a faster version.\n\n```python\n{source}```\n"


def with_harness(source: str) -> str:
    """``source`` followed by the softmax example's harness (for ``accelopt profile``)."""
    original = SOFTMAX.read_text()
    harness = original[original.index("# --- benchmark harness") :]
    return f"{source}\n\nimport os  # noqa: E402  (the harness reads ACCELOPT_SHAPE)\n\n{harness}"


def private_env(directory: Path) -> dict[str, str]:
    """The environment of a CLI run in ``directory``: no inherited ACCELOPT_* variable, memory,
    user config and temp dir inside ``directory`` (hacks write caches there), the repository
    on PYTHONPATH (the CLI runs with ``directory`` as its working directory)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("ACCELOPT_")}
    env["ACCELOPT_MEMORY_DIR"] = str(directory / "memory")
    env["ACCELOPT_CONFIG"] = str(directory / "no-user-config.toml")
    env["ACCELOPT_SHAPE"] = "small"
    env["TMPDIR"] = str(directory / "tmp")
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    env["PYTHONUNBUFFERED"] = "1"
    (directory / "tmp").mkdir(parents=True, exist_ok=True)
    return env


def settings_file(directory: Path, fixer_attempts: int = 0) -> Path:
    """:data:`SETTINGS` written as a JSON settings file in ``directory``, with
    ``search.fixerAttempts`` = ``fixer_attempts``."""
    path = directory / "adversarial-settings.json"
    search = {**SETTINGS["search"], "fixerAttempts": fixer_attempts}
    path.write_text(json.dumps({"accelopt": {**SETTINGS, "search": search}}))
    return path


def run_cli(
    *args: str, env: dict[str, str], cwd: Path, timeout: float = 600
) -> subprocess.CompletedProcess[str]:
    """``accelopt <args>`` through its real entry point, in ``cwd``."""
    return subprocess.run(
        [sys.executable, "-m", "accelopt_cli.main", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=timeout,
        cwd=cwd,
    )


def escape_source(name: str, marker: str, port: int) -> str:
    """The escape candidate ``name`` aimed at the file name ``marker`` and the loopback
    ``port`` of a test."""
    source = HACKS[name]
    for old, new in (
        ('_MARKER = "accelopt-escape-marker"', f"_MARKER = {marker!r}"),
        ("_PORT = 9 ", f"_PORT = {port} "),
    ):
        assert old in source, f"{name}: no {old!r}"
        source = source.replace(old, new, 1)
    return source
