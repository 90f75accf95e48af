"""Reference pages of the engine's side: the CLI (argparse), the settings model, the harness's
``BENCH`` keys and the JSON report (see ``reference.py``, the hook)."""

from __future__ import annotations

import argparse
import dataclasses
import inspect
import re
from collections.abc import Iterator
from typing import Any

from refgen_common import GENERATED_NOTE, UNDESCRIBED, cell, table

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
        + cell(inspect.getdoc(main) or "").split("returns the exit status", 1)[-1].strip(" ;.()")
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
        out.append(table(["argument", "value", "description"], rows))
        if helps:
            sub_rows = [
                [f"[`{name} {sub}`](#{cli_anchor(f'{name} {sub}')})", text or UNDESCRIBED]
                for sub, text in helps.items()
            ]
            out.append("Sub-commands:\n\n" + table(["command", "what it does"], sub_rows))
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
            table(["name", "what it is"], names),
            "The keys `BENCH` may hold (`BENCH_KEYS`); any other key gets a located warning "
            "naming the closest known one. How to write one: "
            "[Your own kernel and harness](../guides/own-kernel.md).\n",
            table(["key", "meaning"], keys),
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
            table(["field", "meaning"], [[f"`{f}`", docs.get(f) or UNDESCRIBED] for f in fields])
        )
    return "\n".join(out)
