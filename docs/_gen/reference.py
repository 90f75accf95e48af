"""The docs site's Reference pages, generated from the sources at build time (issue 51).

MkDocs loads this file as a hook (``hooks:`` in ``mkdocs.yml``): :func:`on_files` adds one
generated page per entry of :data:`PAGES`, so no reference page is a hand-edited copy that can
drift. ``tests/docs/test_reference.py`` builds the same text with :func:`page_text` and checks
that every command, option, setting, ``BENCH`` key, report field and language-server command of
the sources has its entry.

The sources:

* ``accelopt`` commands and options: :func:`accelopt_cli.main.build_parser` (argparse);
* settings: :func:`accelopt_core.settings.settings_markdown` (the settings model);
* ``BENCH`` keys: :data:`accelopt_core.kernelfile.model.BENCH_KEYS`;
* the JSON report: :meth:`accelopt_core.search.report.SearchReport.to_dict`,
  :meth:`accelopt_core.search.candidate.Candidate.to_dict`,
  :class:`accelopt_core.onsite.protocol.EvalResult` and
  :class:`accelopt_core.search.report.FailedCandidate`;
* the language server: the handlers, commands and code-action kinds a real
  :func:`accelopt_server.server.create_server` registers, the LSP messages ``accelopt_server``
  sends (found in its source) and its own notifications (``accelopt/...`` constants).

A key a source gains without a description here renders as :data:`UNDESCRIBED`, which the test
refuses: add its line to the tables below.
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import inspect
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
#: What a field, key or item without a description renders as (the test fails on it).
UNDESCRIBED = "(no description yet: add one in docs/_gen/reference.py)"
GENERATED_NOTE = (
    '!!! note "Generated"\n    This page is generated from the sources when the site is '
    "built (`docs/_gen/reference.py`); edit the source it names, not this page.\n"
)


def _cell(text: Any) -> str:
    """``text`` as one markdown table cell: one line, reST literals and roles as code, pipes
    escaped."""
    text = " ".join(str(text).split())
    text = re.sub(r":[a-z]+:`~?(?:[\w.]+\.)?([\w]+)`", r"`\1`", text)
    return text.replace("``", "`").replace("|", "\\|")


def _table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + " --- |" * len(header)]
    lines += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


# --- the CLI ----------------------------------------------------------------------------------


def cli_parsers() -> Iterator[tuple[str, argparse.ArgumentParser]]:
    """``("accelopt memory list", parser)`` for the top-level parser and every sub-command,
    depth first, in the order the parser declares them."""
    from accelopt_cli.main import build_parser

    def walk(name: str, parser: argparse.ArgumentParser):
        yield name, parser
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for sub_name, sub in action.choices.items():
                    yield from walk(f"{name} {sub_name}", sub)

    yield from walk("accelopt", build_parser())


def cli_options(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    """The parser's own arguments (positionals and options), without its sub-command slot."""
    return [a for a in parser._actions if not isinstance(a, argparse._SubParsersAction)]


def _subcommand_help(parser: argparse.ArgumentParser) -> dict[str, str]:
    helps: dict[str, str] = {}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for choice in action._choices_actions:
                helps[choice.dest] = choice.help or ""
    return helps


#: Arguments the parsers give no help text: (command, dest) -> description.
CLI_ARG_DOCS = {
    ("accelopt memory search", "text"): "what to look for: words of a rule, a plan or code "
    "(`tl.dot`), ranked by similarity",
    ("accelopt memory export", "file"): "the JSON Lines file to write, one experience per line",
    ("accelopt memory import", "file"): "a JSON Lines file written by `accelopt memory export`; "
    "every line is validated first, and a bad line imports nothing",
    ("accelopt export", "path"): "a FlashInfer-Bench solution JSON: its sources are written to "
    "`SOLUTION/` beside it, bound back to the solution",
}


def _option_row(parser: argparse.ArgumentParser, action: argparse.Action) -> list[str]:
    formatter = argparse.HelpFormatter(parser.prog, width=100)
    names = ", ".join(f"`{s}`" for s in action.option_strings) or f"`{action.dest}`"
    if action.nargs == 0:
        value = ""
    elif action.choices and not action.metavar:
        value = " | ".join(f"`{c}`" for c in action.choices)
    else:
        metavar = action.metavar or (
            action.dest if not action.option_strings else action.dest.upper()
        )
        value = f"`{metavar}`"
        if action.nargs in ("+", "*"):
            value += " ..." if action.nargs == "+" else " (any number)"
        if action.type in (int, float):
            value += f" ({action.type.__name__})"
    text = formatter._expand_help(action) if action.help else ""
    text = text or CLI_ARG_DOCS.get((parser.prog, action.dest), "")
    if isinstance(action, argparse._AppendAction):
        text += " (repeatable)"
    if action.required and action.option_strings:
        text += " (required)"
    if not action.option_strings and action.nargs == "?":
        text += " (optional)"
    return [names, value, text or UNDESCRIBED]


def cli_anchor(name: str) -> str:
    """The anchor of a command's section: ``accelopt memory list`` -> ``cli-memory-list``."""
    return "-".join(["cli", *name.split()[1:]]) if name != "accelopt" else "cli-accelopt"


def cli_markdown() -> str:
    """The CLI reference: every command with its usage, description and options."""
    from accelopt_cli.main import main

    out = [
        "# CLI reference\n",
        GENERATED_NOTE,
        "Every `accelopt` command and option, from the argparse parsers "
        "(`accelopt_cli.main.build_parser`). `accelopt COMMAND --help` prints the same.\n",
        "Exit status: "
        + _cell(inspect.getdoc(main) or "").split("returns the exit status", 1)[-1].strip(" ;.()")
        + ".\n",
    ]
    for name, parser in cli_parsers():
        helps = _subcommand_help(parser)
        level = "#" * min(2 + name.count(" ") - 1, 4) if name != "accelopt" else "##"
        out.append(f"{level} `{name}` {{#{cli_anchor(name)}}}\n")
        description = parser.description or ""
        if description:
            out.append(description + "\n")
        formatter = argparse.HelpFormatter(parser.prog, width=88)
        formatter.add_usage(parser.usage, parser._actions, parser._mutually_exclusive_groups)
        out.append("```text\n" + formatter.format_help().strip() + "\n```\n")
        rows = [_option_row(parser, a) for a in cli_options(parser)]
        out.append(_table(["argument", "value", "description"], rows))
        if helps:
            sub_rows = [
                [f"[`{name} {sub}`](#{cli_anchor(f'{name} {sub}')})", text or UNDESCRIBED]
                for sub, text in helps.items()
            ]
            out.append("Sub-commands:\n\n" + _table(["command", "what it does"], sub_rows))
    return "\n".join(out)


# --- settings ---------------------------------------------------------------------------------


def settings_page() -> str:
    """Every setting of the settings model, as ``python -m accelopt_core.settings`` prints it."""
    from accelopt_core.settings import settings_markdown

    return "\n".join(
        [
            "# Settings reference\n",
            GENERATED_NOTE,
            "Every setting of the one settings model (`accelopt_core/settings.py`), which feeds "
            "the CLI, the language server and the VS Code extension's `package.json`. In a "
            "project file or the user config drop the `accelopt.` prefix (`[tool.accelopt.search]` "
            "`beamWidth = 4`); where they come from and which wins: "
            "[Configuration](../guides/configuration.md). "
            "`python -m accelopt_core.settings` prints this table.\n",
            settings_markdown(),
        ]
    )


# --- the harness's BENCH keys -----------------------------------------------------------------

#: What each ``BENCH`` key means (the keys themselves come from ``BENCH_KEYS``).
BENCH_DOCS = {
    "entry": "Required. The launcher that is timed and rewritten: a function, `Function.apply`, "
    "a method, a `lambda` or a `functools.partial` whose call launches a `@triton.jit` / "
    "`@nki.jit` kernel.",
    "rtol": "Relative tolerance (a non-negative number). Default by the output's dtype.",
    "atol": "Absolute tolerance, scaled to the reference's magnitude: "
    "|out − ref| ≤ atol·max|ref| + rtol·|ref|, so an all-zero output fails.",
    "flops": "A function of the inputs giving the work in FLOP, for the roofline and % of peak.",
    "bytes": "A function of the inputs giving the bytes moved, for GB/s and % of peak.",
    "module": "The kernel module a harness in its own file rewrites, when the entry reaches "
    'kernels of several (`"mypkg.ops.rms_norm"`).',
    "shapes": "A list of dicts, each passed to `get_inputs(seed, device, **shape)`: every shape "
    "is checked, every shape but the last is timed (the last is held out), speed is the "
    "geometric mean.",
    "backward": "`True`: every call is forward + backward; input gradients are compared with "
    "the reference's autograd and the timed region is forward + backward.",
    "values": "Bounds or turns off the derived value ranges the judge checks besides your inputs: "
    "a dict of input name -> `(low, high)` (derived values stay in that range) or `False` (none "
    "for that input); `False` turns value derivations off for every input "
    "([derived inputs](../concepts/judging.md#derived-inputs)).",
    "kernelbench": "Set by the harness AccelOpt generates for a KernelBench problem (the problem "
    "file is the harness of a `ModelNew` file); not written by hand.",
}
#: The harness's functions (``HARNESS_NAMES`` other than ``BENCH``).
HARNESS_DOCS = {
    "get_inputs": "`get_inputs(seed: int, device: str, **shape) -> tuple`: fresh random inputs "
    "for one trial (a tuple, even of one input: `return (x,)`).",
    "reference": "`reference(*inputs)`: the ground truth (PyTorch or NumPy), the same outputs "
    "as the entry.",
    "BENCH": "A dict literal naming the entry and the optional keys below.",
}


def harness_page() -> str:
    """The harness's names and every key ``BENCH`` may hold."""
    from accelopt_core.kernelfile.model import BENCH_KEYS, HARNESS_NAMES

    names = [[f"`{n}`", HARNESS_DOCS.get(n, UNDESCRIBED)] for n in HARNESS_NAMES]
    keys = [[f'`BENCH["{k}"]`', BENCH_DOCS.get(k, UNDESCRIBED)] for k in BENCH_KEYS]
    return "\n".join(
        [
            "# Harness reference\n",
            GENERATED_NOTE,
            "A kernel file (or a harness file beside its kernel module) carries its benchmark "
            "in plain Python that imports nothing from AccelOpt. The names it defines "
            "(`accelopt_core.kernelfile.model.HARNESS_NAMES`):\n",
            _table(["name", "what it is"], names),
            "The keys `BENCH` may hold (`BENCH_KEYS`); any other key gets a located warning "
            "naming the closest known one. How to write one: "
            "[Your own kernel and harness](../guides/own-kernel.md).\n",
            _table(["key", "meaning"], keys),
        ]
    )


# --- the JSON report ----------------------------------------------------------------------------

#: ``accelopt optimize --json``'s top-level fields (:meth:`SearchReport.to_dict`).
REPORT_DOCS = {
    "path": "The kernel file searched (as given).",
    "kernel": "The kernel optimized.",
    "entry": 'The launcher `BENCH["entry"]` names.',
    "target": "Where the candidates ran (`local`, `ssh://...`, `ray://...`).",
    "timing": "How latencies were measured: `cuda`, `interpreter` (CPU, says nothing about a "
    "GPU), `simulated` (NKI simulator), `neuron` or `none`.",
    "proposer": "Who proposed the rewrites: the LLM model, or the offline proposer.",
    "stopped_reason": "`completed`, or why the search stopped early (cancelled, a budget, "
    "`stopped: LLM unusable: ...`).",
    "iterations_run": "Iterations T actually run.",
    "evaluated": "Candidates evaluated (duplicates counted once).",
    "duplicates": "Samples merged into an already-evaluated candidate (same normalized source).",
    "failures": "Failed candidates counted by evaluation status.",
    "failed_candidates": "Every sample that did not become a correct candidate, in order (the "
    "failed-candidate table below).",
    "run_id": "The run's folder under `<memoryDir>/runs/` (`accelopt runs show ID`); empty when "
    "none was kept.",
    "baseline": "The file as it was, as a candidate (the candidate table below).",
    "derived_inputs": "The derived inputs every candidate was checked on and those skipped: "
    '`{"used": [...], "skipped": [{"name", "why"}], "seconds"}`.',
    "candidates": "Verified improvements only, best first (`rank` 1, 2, ...), each with its "
    "`diff` against the original file.",
    "tokens": "LLM usage per role (`planner`, `executor`, `summarizer`, `fixer`) and `total`, as "
    "the endpoint billed it.",
    "cost_usd": "Cost from `accelopt.llm.prices` (0 without a price table).",
    "wall_s": "Wall time of the search, s.",
    "memory_added": "Experiences the search added to the optimization memory.",
    "experiences": "Those experiences, as records.",
    "explored": "Every other candidate evaluated (correct but not faster, failed, cut off), "
    "with its diff and without its source: the beam's tree.",
    "warnings": "Non-fatal notes (sandbox parts missing, sizes scaled, a save that failed...).",
    "original_source": "The kernel module's source before the search.",
}
#: A candidate's fields beyond those its class docstring describes.
CANDIDATE_DOCS = {
    "id": "12 hex digits of sha256 over the normalized source.",
    "latency_ms": "Its median latency, ms (after re-timing, the slower of its first median and "
    "its rounds').",
    "correct": "True when its evaluation status is `ok`.",
    "status": "Its evaluation status (`result.status`).",
    "plan": "The plan's title (`baseline` for the baseline).",
    "plan_text": "The plan in full.",
    "pct_of_peak": "% of the device's peak (roofline time / measured latency), GPU or Neuron "
    "timing only.",
    "result": "Its evaluation (the evaluation-result table below).",
    "source": "The full module: kernels, launcher and the original harness.",
    "diff": "Unified diff against the original file (ranked candidates and `explored`).",
}
#: An evaluation result's fields beyond those its class docstring describes.
RESULT_DOCS = {
    "harness_version": "The version of the on-target harness code that produced it.",
}
#: A failed candidate's fields (:class:`FailedCandidate`).
FAILED_DOCS = {
    "plan": "The plan's title.",
    "stage": "`parse` (the reply held no usable code), `llm` (the call failed), `gate` (a trust "
    "rule of the judge), `compile`, `launch` (cannot launch on the configured GPU), "
    "`incorrect`, `timeout` or `crash`.",
    "reason": "The reason in full.",
    "line": "1-based line in the candidate (null for `parse` and `llm`).",
    "status": "The evaluation status, `no_code` for `parse` and `llm`.",
    "rule": "The judge's rule for stage `gate` (`gate: torch compute`, `no kernel launch`, ...).",
    "candidate_id": "Null when no candidate was made (`parse`, `llm`).",
    "parent_id": "The candidate it rewrote.",
    "iteration": "The iteration that made it.",
    "fixed": "True for the fixer's attempt.",
    "retime": "True when it failed at its re-timing, not at its first evaluation.",
    "call": "The transcript call of its reply (`accelopt runs show`).",
    "excerpt": "The numbered lines around `line`.",
}


def _attribute_docs(cls: type) -> dict[str, str]:
    """``name: text`` entries of a Google-style ``Attributes:`` section; ``a / b / c: text``
    describes each of ``a``, ``b`` and ``c``."""
    doc = inspect.getdoc(cls) or ""
    section = doc.split("Attributes:", 1)[1] if "Attributes:" in doc else ""
    docs: dict[str, str] = {}
    name_re = re.compile(r"^    ([a-z0-9_]+(?: / [a-z0-9_]+)*): (.*)$")
    current: list[str] = []
    for line in section.splitlines():
        if m := name_re.match(line):
            current = m.group(1).split(" / ")
            for name in current:
                docs[name] = m.group(2)
        elif line.startswith("        ") and current:
            for name in current:
                docs[name] += " " + line.strip()
    return docs


def sample_report() -> dict[str, Any]:
    """A report as ``accelopt optimize --json`` prints it, of a made-up search whose baseline
    is also its one ranked candidate and which has one failed sample: its keys are the real
    ``to_dict``'s."""
    from accelopt_core.onsite.protocol import EvalResult
    from accelopt_core.search.candidate import Candidate
    from accelopt_core.search.report import FailedCandidate, SearchReport

    source = "def f():\n    pass\n"
    base = Candidate.baseline(source, EvalResult(status="ok", latency_ms=1.0))
    report = SearchReport(
        path="k.py",
        kernel_name="k",
        entry="f",
        baseline=base,
        candidates=[base],
        original_source=source,
        target="local",
        timing="interpreter",
        proposer="offline",
        failed_candidates=[FailedCandidate(plan="p", stage="parse", reason="r")],
    )
    return report.to_dict()


def report_sections() -> list[tuple[str, str, list[str], dict[str, str]]]:
    """``(title, intro, fields, descriptions)`` per table of the report page."""
    from accelopt_core.onsite.protocol import EvalResult
    from accelopt_core.search.candidate import Candidate

    report = sample_report()
    candidate_docs = {**_attribute_docs(Candidate), **CANDIDATE_DOCS}
    candidate_docs.setdefault("plan_text", candidate_docs.get("plan_title / plan_text", ""))
    result_fields = [f.name for f in dataclasses.fields(EvalResult)]
    return [
        ("The search report", "`accelopt optimize --json`, a run's `report.json`, and "
         "`accelopt runs show ID --json`.", list(report), REPORT_DOCS),
        ("A candidate", "`baseline`, each of `candidates` and (without `source`) of "
         "`explored`.", list(report["candidates"][0]), candidate_docs),
        ("An evaluation result", "A candidate's `result`; `accelopt profile --json` prints one "
         "per file (a file that cannot be evaluated is `{\"path\", \"error\"}`).",
         result_fields, {**_attribute_docs(EvalResult), **RESULT_DOCS}),
        ("A failed candidate", "Each of `failed_candidates`.",
         list(report["failed_candidates"][0]), FAILED_DOCS),
    ]  # fmt: skip


def report_page() -> str:
    """The JSON report's fields, table by table."""
    out = [
        "# JSON report reference\n",
        GENERATED_NOTE,
        "`--json` is the machine interface of the CLI. The fields below are those the code "
        "writes (`SearchReport.to_dict`, `Candidate.to_dict`, `EvalResult`, `FailedCandidate` "
        "in `accelopt_core/search/` and `accelopt_core/onsite/protocol.py`).\n",
    ]
    for title, intro, fields, docs in report_sections():
        out.append(f"## {title}\n")
        out.append(intro + "\n")
        out.append(
            _table(["field", "meaning"], [[f"`{f}`", docs.get(f) or UNDESCRIBED] for f in fields])
        )
    return "\n".join(out)


# --- the language server --------------------------------------------------------------------------

#: What the server does on each LSP message it handles.
LSP_HANDLED_DOCS = {
    "initialize": "Reads `initializationOptions` (the `accelopt` section) and the client's "
    "capabilities.",
    "initialized": "Pulls `workspace/configuration`, registers file watchers where the client "
    "supports dynamic registration.",
    "shutdown": "Cancels running searches and stops the workers.",
    "textDocument/didOpen": "Finds kernels and harnesses; publishes diagnostics.",
    "textDocument/didChange": "Re-parses (debounced); offers only improvements that still apply.",
    "textDocument/didSave": "Profile on save (`accelopt.profileOnSave`); re-reads a changed "
    "`pyproject.toml` / `accelopt.toml`.",
    "textDocument/didClose": "Forgets the document.",
    "textDocument/codeLens": "The lenses above each kernel (profile, Optimize, progress, Show "
    "Search, improvements).",
    "textDocument/hover": "A kernel's last profile and GPU facts, and what the memory learned.",
    "textDocument/codeAction": "Ranked improvements, harness quick fixes, optimize / cancel.",
    "codeAction/resolve": "Computes an improvement's edit as minimal hunks for the document "
    "version it was offered for (ContentModified when the kernel changed).",
    "workspace/didChangeConfiguration": "Pulls the settings again.",
    "workspace/didChangeWatchedFiles": "Re-reads project files and harness files.",
    "window/workDoneProgress/cancel": "Cancels the search behind that progress.",
    "workspace/executeCommand": "Runs one of the commands below.",
}
#: What the server sends, for each LSP message it sends.
LSP_SENT_DOCS = {
    "$/progress": "Work-done progress of each search (iteration, best speedup, failures).",
    "textDocument/publishDiagnostics": "Located errors, warnings and notes: harness problems, "
    "failed profiles (`gpu-compile`, `gpu-launch`, `spills`, `not-timed`, ...).",
    "window/logMessage": "Logs at `accelopt.logLevel` (keys and tokens scrubbed), each failed "
    "candidate as it happens.",
    "window/showMessage": "Invalid settings (once per breakage), a kernel's status.",
    "window/showMessageRequest": "Which harness file measures a module (`accelopt.pickHarness`).",
    "workspace/codeLens/refresh": "Asks the client to refresh the lenses (throttled) when a "
    "profile or a search milestone lands.",
    "workspace/configuration": "Pulls the `accelopt` section per document scope.",
    "workspace/applyEdit": "Applies an improvement for clients without `codeAction/resolve`.",
    "client/registerCapability": "Registers file watchers for project and harness files.",
    "window/workDoneProgress/create": "Creates a search's progress token.",
    "exit": "",
}
#: The server's own notifications (``accelopt/...``).
LSP_CUSTOM_DOCS = {
    "accelopt/searchView": "Server → client: an update of a search view opened with "
    "`accelopt.searchView` (at most every 0.5 s, only the candidates that changed), until "
    "`accelopt.searchViewClosed`.",
}
#: Each code-action kind the server offers.
CODE_ACTION_DOCS = {
    "refactor.rewrite": "`AccelOpt: 2.31x faster — <plan>`: a ranked, verified improvement "
    "(best first, at most `accelopt.maxCodeActions`), and its `AccelOpt: preview …` twin.",
    "quickfix": "Harness fixes: create `bench_<module>.py` or insert a harness skeleton; pick "
    "the harness file that measures a module.",
    "refactor": "`AccelOpt: optimize <kernel>` (starts a search), or cancel the running one.",
}


#: Commands whose handler's docstring points elsewhere: what they do.
COMMAND_DOCS = {
    "accelopt.pickHarness": "``accelopt.pickHarness [uri, harnessPath?]``: which of several "
    "harness files measures the kernel module; without ``harnessPath`` the user is asked "
    "(``window/showMessageRequest``). The pick is kept in ``harness_picks.json`` of the memory "
    "directory.",
}


def _pygls_name(method: str) -> str:
    method = method.replace("$/", "").replace("/", "_")
    return re.sub(r"(?<!^)(?=[A-Z])", "_", method).lower()


def lsp_sent_methods() -> list[str]:
    """The LSP messages ``accelopt_server`` sends: the pygls calls found in its source (a
    ``window_log_message`` attribute, ``..._async`` too), plus the work-done progress set-up
    pygls sends for it."""
    from lsprotocol.types import METHOD_TO_TYPES

    by_name = {_pygls_name(m): m for m in METHOD_TO_TYPES}
    found: set[str] = set()
    for path in sorted((ROOT / "accelopt_server").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text("utf-8"))):
            if isinstance(node, ast.Attribute):
                method = by_name.get(node.attr.removesuffix("_async"))
                if method and method not in ("initialize", "initialized", "shutdown"):
                    found.add(method)
    if "$/progress" in found:
        found.add("window/workDoneProgress/create")
    return sorted(found)


def lsp_custom_notifications() -> list[str]:
    """``accelopt/...`` method names in ``accelopt_server`` (string constants)."""
    found: set[str] = set()
    for path in sorted((ROOT / "accelopt_server").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text("utf-8"))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                if re.fullmatch(r"accelopt/[A-Za-z]+", node.value):
                    found.add(node.value)
    return sorted(found)


def lsp_server_facts() -> dict[str, Any]:
    """What a real server registers: ``handled`` methods, ``commands`` (name -> the feature
    method's docstring) and ``code_action_kinds``."""
    from accelopt_server.features import COMMANDS
    from accelopt_server.server import create_server

    server = create_server()
    fm = server.protocol.fm
    options = fm.feature_options.get("textDocument/codeAction")
    kinds = [str(k.value) for k in getattr(options, "code_action_kinds", None) or []]
    commands = {
        name: inspect.getdoc(getattr(cls, method)) or "" for name, (cls, method) in COMMANDS.items()
    }
    for name in fm.commands:
        commands.setdefault(name, "")
    handled = sorted(fm.features)
    if fm.commands:
        handled.append("workspace/executeCommand")
    return {"handled": handled, "commands": commands, "code_action_kinds": kinds}


def _command_results() -> dict[str, str]:
    """``accelopt.optimize`` -> ``{jobId, started, message?}``: what each command answers, from
    the ``name [args] -> result`` lines of ``accelopt_server.features``' docstring (the result
    up to its first top-level ``(`` or ``;``)."""
    import accelopt_server.features as features

    text = " ".join((features.__doc__ or "").split())
    found = {}
    for m in re.finditer(r"``(accelopt\.[A-Za-z]+) \[[^\]]*\]``(?: or ``\[[^\]]*\]``)? -> ", text):
        depth, end = 0, m.end()
        while end < len(text):
            ch = text[end]
            depth += ch in "{[" and 1 or (-1 if ch in "}]" else 0)
            if depth == 0 and (ch in "(;" or text.startswith(" * ", end)):
                break
            end += 1
        found.setdefault(m.group(1), text[m.end() : end].strip())
    return found


def lsp_page() -> str:
    """The language server's messages, commands, notifications and code-action kinds."""
    facts = lsp_server_facts()
    results = _command_results()
    commands = []
    for name, doc in facts["commands"].items():
        text = " ".join(COMMAND_DOCS.get(name, doc.split("\n\n", 1)[0] if doc else "").split())
        m = re.match(r"``(\S+) (\[[^\]]*\])``(?: or ``(\[[^\]]*\])``)?:? ?(.*)", text)
        args, what = ("` or `".join(filter(None, m.group(2, 3))), m.group(4)) if m else ("", text)
        line = f"Arguments: `{args}`" if args else "Arguments: none"
        if results.get(name):
            line += f" · result: {_cell(results[name])}"
        what = _cell(what) or UNDESCRIBED
        commands.append(f"### `{name}`\n\n{line}\n\n{what[:1].upper() + what[1:]}\n")
    handled = [[f"`{m}`", LSP_HANDLED_DOCS.get(m, UNDESCRIBED)] for m in facts["handled"]]
    sent = [
        [f"`{m}`", LSP_SENT_DOCS.get(m) or UNDESCRIBED] for m in lsp_sent_methods() if m != "exit"
    ]
    custom = [[f"`{m}`", LSP_CUSTOM_DOCS.get(m, UNDESCRIBED)] for m in lsp_custom_notifications()]
    kinds = [[f"`{k}`", CODE_ACTION_DOCS.get(k, UNDESCRIBED)] for k in facts["code_action_kinds"]]
    return "\n".join(
        [
            "# Language server reference\n",
            GENERATED_NOTE,
            "`accelopt-lsp` (pygls; stdio, or `--tcp 127.0.0.1:2087` for debugging). What a "
            "real server registers (`accelopt_server.server.create_server`), and the messages "
            "its source sends. Malformed params on any request get a JSON-RPC `InvalidParams` "
            "error. How an editor uses them: [VS Code](../guides/vscode.md), "
            "[Neovim](../guides/neovim.md).\n",
            "## Commands (`workspace/executeCommand`)\n",
            "Arguments are JSON arrays.\n",
            *commands,
            "## Notifications of its own\n",
            _table(["method", "meaning"], custom),
            "## Code-action kinds\n",
            _table(["kind", "what is offered"], kinds),
            "## LSP messages it handles\n",
            _table(["method", "what the server does"], handled),
            "## LSP messages it sends\n",
            _table(["method", "when"], sent),
        ]
    )


# --- verdicts, failure stages and rules -----------------------------------------------------

#: Each evaluation status.
STATUS_DOCS = {
    "ok": "Compiled, correct on every seed and derived input, timed.",
    "compile_error": "The candidate did not load or compile (also: for the configured GPU).",
    "incorrect": "Wrong outputs: shape, dtype, NaN/Inf, a value past the tolerance, a mutated "
    "input, or wrong on a derived input.",
    "runtime_error": "It raised, crashed, died of a signal or hit the memory limit.",
    "timeout": "No answer within `accelopt.evaluation.timeoutS`.",
    "rejected": "A trust rule caught it: the gate before it ran, or a check of its run (`rule` "
    "names which).",
}
#: Each failure stage of a failed candidate.
STAGE_DOCS = {
    "llm": "The agent's call failed (no reply).",
    "parse": "The reply held no usable code (no block, edits that do not apply).",
    "gate": "The judge rejected it by a trust rule (`rule` names it).",
    "compile": "It did not load or compile (also for the configured GPU).",
    "launch": "It cannot launch on the configured GPU (threads, shared memory, grid).",
    "incorrect": "Wrong outputs.",
    "timeout": "No answer in time.",
    "crash": "It raised or died while running.",
}
#: Gate rules whose reason is not in a ``(rule, why)`` constant of ``gate/rules.py``.
GATE_DOCS = {
    "gate: no entry": "The candidate does not define the entry function.",
    "gate: no kernel": "The candidate defines no `@triton.jit` or `@nki.jit` kernel.",
    "gate: no launch": "The entry does not launch a kernel of the file on a path that runs.",
    "gate: try/except": "A try/except around the work: a fallback that hides a failing kernel.",
    "gate: monkey-patching": "It assigns into an imported module (patches torch, triton, ...).",
    "gate: shadowed import": "It rebinds an imported name to something else.",
    "gate: mutable default": "A mutable default argument, a cache across calls.",
    "gate: module state": "The launcher writes module-level state (a result kept across calls).",
    "gate: function attribute": "The launcher writes a function attribute (a result kept "
    "across calls).",
    "gate: global state": "`global` state written at run time.",
    "gate: module-level callable": "The entry is a module-level callable the gate cannot follow.",
    "gate: dead code": "Code after `return` (a kernel launch that never runs).",
    "gate: torch compute": "Torch compute standing in for the kernel (also through "
    "`getattr(torch, ...)`, an alias or a lambda).",
    "gate: precision downcast": "A low-precision dtype the baseline did not have.",
    "gate: unreadable": "The candidate nests too deeply for the gate to read; the gate fails "
    "closed.",
}
#: The judge's and the search's own rules (``*_RULE`` constants and the search's).
RULE_DOCS = {
    "no kernel launch": "A call launched no `@triton.jit` kernel of the candidate (launches are "
    "counted).",
    "output not a plain tensor": "An output is not exactly a `torch.Tensor` / `numpy.ndarray` "
    "(a subclass or a proxy).",
    "protocol violation": "The candidate process answered something other than what the judge "
    "asked (a broken exchange).",
    "file written": "The candidate wrote a file outside its scratch directories.",
    "reference poisoning": "The harness replaced a torch/numpy/time function, or a file the "
    "reference process made was swapped.",
    "wrong on derived input": "Status `incorrect`: wrong on a derived shape, value range or "
    "layout the baseline is right on.",
    "timing inconsistent": "Its timing samples contradict the judge's own clock (wall time, or "
    "the candidate's CPU time under the interpreter).",
    "implausible latency": "A latency under half an interpreter launch, found twice.",
    "over 100% of peak": "Faster than the device's datasheet roofline allows, found twice.",
    "implausible speedup": "An interpreter speedup above `evaluation.maxInterpreterSpeedup` "
    "(50x) that a second evaluation confirms.",
}


def gate_rules() -> list[tuple[str, str]]:
    """``(rule, why)`` for every rule of ``gate.rules.RULES``; ``why`` from the module's
    ``(rule, why)`` constants, else :data:`GATE_DOCS`."""
    from accelopt_core.onsite.gate import rules

    whys = {
        v[0]: v[1]
        for v in vars(rules).values()
        if isinstance(v, tuple) and len(v) == 2 and all(isinstance(x, str) for x in v)
    }

    def sentence(why: str) -> str:
        return why[:1].upper() + why[1:] + ("" if why.endswith(".") else ".")

    return [
        (r, sentence(whys[r]) if r in whys else GATE_DOCS.get(r, UNDESCRIBED)) for r in rules.RULES
    ]


def judge_rules() -> list[str]:
    """The rule names of module-level ``*_RULE = "..."`` constants in ``accelopt_core`` (and
    the search's ``IMPLAUSIBLE``)."""
    found: list[str] = []
    for path in sorted((ROOT / "accelopt_core").rglob("*.py")):
        for node in ast.parse(path.read_text("utf-8")).body:
            if (
                isinstance(node, ast.Assign)
                and len(node.targets) == 1
                and isinstance(node.targets[0], ast.Name)
                and (node.targets[0].id.endswith("_RULE") or node.targets[0].id == "IMPLAUSIBLE")
                and isinstance(node.value, ast.Constant)
                and isinstance(node.value.value, str)
            ):
                found.append(node.value.value)
    return list(dict.fromkeys(found))


def verdicts_page() -> str:
    """Evaluation statuses, failure stages and every rule a rejection can name."""
    from accelopt_core.onsite.protocol import EVAL_STATUSES
    from accelopt_core.search.report import FAILURE_STAGES

    return "\n".join(
        [
            "# Verdicts, stages and rules\n",
            GENERATED_NOTE,
            "What a result's `status`, a failed candidate's `stage` and a rejection's `rule` can "
            "be (`EVAL_STATUSES`, `FAILURE_STAGES`, the gate's `RULES` and the judge's "
            "`*_RULE` constants). What to do about each: [Troubleshooting](../troubleshooting.md); "
            "why the judge has them: [How a candidate is judged](../concepts/judging.md).\n",
            "## Evaluation statuses\n",
            _table(
                ["status", "meaning"],
                [[f"`{s}`", STATUS_DOCS.get(s, UNDESCRIBED)] for s in EVAL_STATUSES],
            ),
            "## Failure stages\n",
            _table(
                ["stage", "meaning"],
                [[f"`{s}`", STAGE_DOCS.get(s, UNDESCRIBED)] for s in FAILURE_STAGES],
            ),
            "## The gate's rules\n",
            "A rejection before the candidate runs; a search remembers it as a `reward-hack: "
            "<rule>` negative experience.\n",
            _table(["rule", "what it refuses"], [[f"`{r}`", why] for r, why in gate_rules()]),
            "## The judge's rules\n",
            "Checks of the candidate's run (status `rejected`, except `wrong on derived input`).\n",
            _table(
                ["rule", "what it catches"],
                [[f"`{r}`", RULE_DOCS.get(r, UNDESCRIBED)] for r in judge_rules()],
            ),
        ]
    )


#: Generated page (path under docs/) -> the function that writes it.
PAGES: dict[str, Callable[[], str]] = {
    "reference/cli.md": cli_markdown,
    "reference/settings.md": settings_page,
    "reference/harness.md": harness_page,
    "reference/report.md": report_page,
    "reference/lsp.md": lsp_page,
    "reference/verdicts.md": verdicts_page,
}


def page_text(path: str) -> str:
    """The generated text of one page of :data:`PAGES`."""
    return PAGES[path]()


def kernelbench_mapping() -> str:
    """How a KernelBench problem maps onto a harness:
    :func:`accelopt_core.kernelfile.kernelbench.mapping_doc`, its heading dropped."""
    from accelopt_core.kernelfile.kernelbench import mapping_doc

    return mapping_doc().removeprefix("**KernelBench problems.** ")


#: ``<!-- gen: NAME -->`` in a hand-written page -> the function whose text replaces it.
INCLUDES: dict[str, Callable[[], str]] = {"kernelbench-mapping": kernelbench_mapping}


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    """MkDocs hook: replace each ``<!-- gen: NAME -->`` marker of a page by its text."""

    def include(m: re.Match[str]) -> str:
        make = INCLUDES.get(m.group(1))
        if make is None:
            raise KeyError(f"{page.file.src_uri}: no generated text named {m.group(1)!r}")
        return make()

    return re.sub(r"<!-- gen: ([\w-]+) -->", include, markdown)


def on_files(files: Any, config: Any) -> Any:
    """MkDocs hook: add the generated reference pages to the site's files."""
    from mkdocs.structure.files import File

    for path, make in PAGES.items():
        files.append(File.generated(config, path, content=make()))
    return files
