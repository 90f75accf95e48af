"""Reference pages of the language server (commands, notifications, code-action kinds, LSP
messages) and of the verdicts (statuses, failure stages, rules); see ``reference.py``, the
hook."""

from __future__ import annotations

import ast
import inspect
import re
from typing import Any

from refgen_common import GENERATED_NOTE, ROOT, UNDESCRIBED, cell, table

# --- the language server --------------------------------------------------------------------------

#: What the server does on each LSP message it handles.
LSP_HANDLED_DOCS = {
    "initialize": "Reads `initializationOptions` (the `accelopt` section) and the client's "
    "capabilities.",
    "initialized": "Pulls `workspace/configuration`, registers file watchers where the client "
    "supports dynamic registration.",
    "shutdown": "Stops every background job (running searches) and task, then closes the engines.",
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
    import logging

    from accelopt_server.features import COMMANDS
    from accelopt_server.logs import LOGGER_NAME
    from accelopt_server.server import create_server

    # A server routes the ``accelopt`` logger to its client and stops its propagation: undo
    # that here, so that the build (or a test process that imports this) keeps its logging.
    logger = logging.getLogger(LOGGER_NAME)
    saved = (list(logger.handlers), logger.propagate, logger.level)
    try:
        server = create_server()
    finally:
        logger.handlers[:] = saved[0]
        logger.propagate, logger.level = saved[1], saved[2]
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
            line += f" · result: {cell(results[name])}"
        what = cell(what) or UNDESCRIBED
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
            table(["method", "meaning"], custom),
            "## Code-action kinds\n",
            table(["kind", "what is offered"], kinds),
            "## LSP messages it handles\n",
            table(["method", "what the server does"], handled),
            "## LSP messages it sends\n",
            table(["method", "when"], sent),
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
    "wrong on an input found by search": "Status `incorrect`: the counterexample search found "
    "an input the baseline is right on and the candidate is not (shrunk, with its seed).",
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
            table(
                ["status", "meaning"],
                [[f"`{s}`", STATUS_DOCS.get(s, UNDESCRIBED)] for s in EVAL_STATUSES],
            ),
            "## Failure stages\n",
            table(
                ["stage", "meaning"],
                [[f"`{s}`", STAGE_DOCS.get(s, UNDESCRIBED)] for s in FAILURE_STAGES],
            ),
            "## The gate's rules\n",
            "A rejection before the candidate runs; a search remembers it as a `reward-hack: "
            "<rule>` negative experience.\n",
            table(["rule", "what it refuses"], [[f"`{r}`", why] for r, why in gate_rules()]),
            "## The judge's rules\n",
            "Checks of the candidate's run (status `rejected`, except `wrong on derived input` and "
            "`wrong on an input found by search`).\n",
            table(
                ["rule", "what it catches"],
                [[f"`{r}`", RULE_DOCS.get(r, UNDESCRIBED)] for r in judge_rules()],
            ),
        ]
    )
