"""The generated Reference pages (issue 51) hold an entry for everything the sources define:
every ``accelopt`` command and option, every setting, every ``BENCH`` key, every field of the
JSON report, every language-server command, notification and code-action kind, and every
status, stage and rule a verdict names. The items are read from the sources here, on their own,
and looked up in the text the MkDocs hook (``docs/_gen/reference.py``) writes."""

from __future__ import annotations

import argparse
import dataclasses
import re

import pytest

from tests.docs.docs_pages import ROOT, reference

yaml = pytest.importorskip("yaml")  # the docs extra (mkdocs) brings it
REF = reference()


@pytest.fixture(autouse=True)
def _restore_logging():
    """A server routes the ``accelopt`` logger to its client: undo that for the other tests of
    this process (a caplog test of ``accelopt.search`` saw nothing after it)."""
    import logging

    from accelopt_server.logs import LOGGER_NAME

    logger = logging.getLogger(LOGGER_NAME)
    saved = (list(logger.handlers), logger.propagate, logger.level)
    yield
    logger.handlers[:] = saved[0]
    logger.propagate, logger.level = saved[1], saved[2]


def _page(path: str) -> str:
    return REF.page_text(path)


def _commands() -> list[tuple[str, argparse.ArgumentParser]]:
    from accelopt_cli.main import build_parser

    found = []
    todo = [("accelopt", build_parser())]
    while todo:
        name, parser = todo.pop()
        found.append((name, parser))
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                todo += [(f"{name} {sub}", p) for sub, p in action.choices.items()]
    return found


def _section(text: str, heading: str) -> str:
    """The text under the heading that holds ``heading`` up to the next heading."""
    m = re.search(rf"^#+ {re.escape(heading)}[^\n]*\n(.*?)(?=^#+ |\Z)", text, re.M | re.S)
    assert m, f"no heading {heading!r}"
    return m.group(1)


def test_every_command_and_option_has_an_entry() -> None:
    text = _page("reference/cli.md")
    commands = _commands()
    assert {"accelopt optimize", "accelopt memory list", "accelopt target check"} <= {
        n for n, _ in commands
    }
    for name, parser in commands:
        section = _section(text, f"`{name}`")
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for sub in action.choices:
                    assert f"`{name} {sub}`" in section, f"{name}: no entry for {sub}"
                continue
            names = action.option_strings or [action.dest]
            for option in names:
                assert re.search(rf"^\| [^\n]*`{re.escape(option)}`", section, re.M), (
                    f"{name}: no entry for {option}"
                )


def test_every_setting_has_an_entry() -> None:
    from accelopt_core.settings import vscode_configuration

    text = _page("reference/settings.md")
    keys = list(vscode_configuration())
    assert "accelopt.search.beamWidth" in keys
    missing = [k for k in keys if not re.search(rf"^\| `{re.escape(k)}` \|", text, re.M)]
    assert missing == []


def test_every_bench_key_and_harness_name_has_an_entry() -> None:
    from accelopt_core.kernelfile.model import BENCH_KEYS, HARNESS_NAMES

    text = _page("reference/harness.md")
    for key in BENCH_KEYS:
        assert f'| `BENCH["{key}"]` |' in text, key
    for name in HARNESS_NAMES:
        assert f"| `{name}` |" in text, name


def test_every_report_field_has_an_entry() -> None:
    from accelopt_core.onsite.protocol import EvalResult
    from accelopt_core.search.report import FailedCandidate

    text = _page("reference/report.md")
    report = REF.sample_report()
    tables = {
        "The search report": list(report),
        "A candidate": list(report["candidates"][0]),
        "An evaluation result": [f.name for f in dataclasses.fields(EvalResult)],
        "A failed candidate": [f.name for f in dataclasses.fields(FailedCandidate)],
    }
    assert {"baseline", "candidates", "failed_candidates", "explored"} <= set(report)
    for title, fields in tables.items():
        section = _section(text, title)
        missing = [f for f in fields if f"| `{f}` |" not in section]
        assert missing == [], f"{title}: {missing}"


def test_every_language_server_item_has_an_entry() -> None:
    from accelopt_server.features import COMMANDS
    from accelopt_server.features.search_view import NOTIFICATION
    from accelopt_server.server import create_server

    text = _page("reference/lsp.md")
    fm = create_server().protocol.fm
    kinds = fm.feature_options["textDocument/codeAction"].code_action_kinds
    assert "accelopt.optimize" in COMMANDS and kinds
    for name in [*COMMANDS, *fm.commands]:
        assert re.search(rf"^### `{re.escape(name)}`\n\nArguments: ", text, re.M), name
    for kind in kinds:
        assert f"| `{kind.value}` |" in _section(text, "Code-action kinds"), kind
    assert f"| `{NOTIFICATION}` |" in _section(text, "Notifications of its own")
    for method in fm.features:
        assert f"| `{method}` |" in _section(text, "LSP messages it handles"), method
    for method in ("window/logMessage", "textDocument/publishDiagnostics", "$/progress"):
        assert f"| `{method}` |" in _section(text, "LSP messages it sends"), method


def test_every_status_stage_and_rule_has_an_entry() -> None:
    from accelopt_core.onsite.gate.rules import RULES
    from accelopt_core.onsite.judge.rules import NO_LAUNCH_RULE, PLAIN_RULE
    from accelopt_core.onsite.judge.timing import CLOCK_RULE
    from accelopt_core.onsite.protocol import EVAL_STATUSES
    from accelopt_core.search.report import FAILURE_STAGES
    from accelopt_core.search.trials import IMPLAUSIBLE

    text = _page("reference/verdicts.md")
    for status in EVAL_STATUSES:
        assert f"| `{status}` |" in _section(text, "Evaluation statuses"), status
    for stage in FAILURE_STAGES:
        assert f"| `{stage}` |" in _section(text, "Failure stages"), stage
    for rule in RULES:
        assert f"| `{rule}` |" in _section(text, "The gate's rules"), rule
    for rule in (NO_LAUNCH_RULE, PLAIN_RULE, CLOCK_RULE, IMPLAUSIBLE):
        assert f"| `{rule}` |" in _section(text, "The judge's rules"), rule


@pytest.mark.parametrize("path", list(REF.PAGES))
def test_every_entry_is_described(path: str) -> None:
    """A key a source gains shows as UNDESCRIBED until its line is added to the generator."""
    lines = [line for line in _page(path).splitlines() if REF.UNDESCRIBED in line]
    assert lines == []


def test_every_generated_page_is_in_the_nav() -> None:
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text("utf-8"))
    assert "docs/_gen/reference.py" in config["hooks"]
    nav = str(config["nav"])
    for path in REF.PAGES:
        assert path in nav, path
        assert not (ROOT / "docs" / path).exists(), f"{path} must not be a hand-edited copy"


def test_an_undescribed_item_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """The adversarial case: a BENCH key nobody described renders as UNDESCRIBED."""
    import accelopt_core.kernelfile.model as model

    monkeypatch.setattr(model, "BENCH_KEYS", (*model.BENCH_KEYS, "brand_new_key"))
    text = _page("reference/harness.md")
    assert f'| `BENCH["brand_new_key"]` | {REF.UNDESCRIBED} |' in text


def test_every_generated_include_is_used_and_known() -> None:
    """``<!-- gen: NAME -->`` markers of the hand-written pages name texts the hook has."""
    used = {
        m
        for page in (ROOT / "docs").rglob("*.md")
        for m in re.findall(r"<!-- gen: ([\w-]+) -->", page.read_text("utf-8"))
    }
    assert used == set(REF.INCLUDES)
    assert "ModelNew" in REF.INCLUDES["kernelbench-mapping"]()
