"""Tests of accelopt_cli.main: the settings layers (defaults, user config, project file,
``--settings FILE``, flags), the parser and the dispatch table."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from rich.console import Console

from accelopt_cli.main import (
    COMMANDS,
    build_parser,
    effective_settings_for,
    load_settings,
    main,
    read_settings_file,
)


def test_settings_file_nested_and_dotted_keys(tmp_path: Path) -> None:
    path = tmp_path / "settings.json"
    path.write_text(
        json.dumps(
            {
                "accelopt": {"target": "ssh://gpu-box", "search": {"beamWidth": 3}},
                "accelopt.search.iterations": 5,
                "editor.fontSize": 12,
            }
        )
    )
    assert read_settings_file(str(path)) == {
        "target": "ssh://gpu-box",
        "search": {"beamWidth": 3, "iterations": 5},
    }


def test_settings_outside_the_section_are_an_error_not_silently_dropped(tmp_path: Path) -> None:
    # {"search": ...} without the "accelopt" wrapper once read as no settings at all: three of
    # our own test files ran with the defaults instead of their 2 seeds and 5 ms of timing
    path = tmp_path / "settings.json"
    path.write_text(json.dumps({"search": {"beamWidth": 3}, "editor.fontSize": 12}))
    with pytest.raises(SystemExit) as info:
        read_settings_file(str(path))
    assert str(path) in str(info.value)
    assert 'search must be inside the "accelopt" section' in str(info.value)


@pytest.mark.parametrize("text", ["[1, 2]", "{broken"])
def test_unreadable_settings_file_exits_with_a_message(tmp_path: Path, text: str) -> None:
    path = tmp_path / "settings.json"
    path.write_text(text)
    with pytest.raises(SystemExit) as info:
        read_settings_file(str(path))
    assert str(path) in str(info.value)
    with pytest.raises(SystemExit):
        read_settings_file(str(tmp_path / "missing.json"))


def test_flags_override_the_settings_file_and_bad_values_warn(tmp_path: Path) -> None:
    path = tmp_path / "settings.json"
    path.write_text(
        json.dumps(
            {
                "accelopt.search.iterations": 5,
                "accelopt.search.beamWidth": 3,
                "accelopt.llm.model": "file-model",
                "accelopt.llm.planner.model": "planner-model",
            }
        )
    )
    args = build_parser().parse_args(
        ["optimize", "k.py", "--settings", str(path), "-T", "2", "-N", "0", "--target", "local"]
    )
    err = io.StringIO()
    settings = load_settings(args, Console(file=err))
    assert settings.search.iterations == 2 and settings.search.beam_width == 3
    assert settings.search.plans_per_candidate == 2  # -N 0 is out of range: the default
    assert "warning:" in err.getvalue() and "plansPerCandidate" in err.getvalue()
    assert settings.llm.model == "file-model" and settings.llm.planner.model == "planner-model"

    offline = build_parser().parse_args(["optimize", "k.py", "--settings", str(path), "--offline"])
    settings = load_settings(offline, Console(file=io.StringIO()))
    assert settings.llm.model is None and settings.llm.planner.model is None


def test_every_command_of_the_parser_has_a_handler() -> None:
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    assert set(sub.choices) == set(COMMANDS)


def test_usage_error_exits_2(capsys) -> None:
    with pytest.raises(SystemExit) as info:
        main(["optimize"])
    assert info.value.code == 2 and "path" in capsys.readouterr().err


def test_project_file_then_settings_file_then_flags_with_provenance(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text(
        "[tool.accelopt.search]\nbeamWidth = 3\niterations = 4\nsamplesPerPlan = 2\n"
    )
    (tmp_path / "kernels").mkdir()
    extra = tmp_path / "extra.toml"
    extra.write_text("[search]\niterations = 6\nplansPerCandidate = 0\n")
    args = build_parser().parse_args(
        ["optimize", str(tmp_path / "kernels" / "k.py"), "--settings", str(extra), "-K", "3"]
    )
    effective = effective_settings_for(args)
    s = effective.settings.search
    assert (s.beam_width, s.iterations, s.samples_per_plan) == (3, 6, 3)
    assert effective.sources["search.beamWidth"] == f"project file {tmp_path / 'pyproject.toml'}"
    assert effective.sources["search.iterations"] == f"settings file {extra}"
    assert effective.sources["search.samplesPerPlan"] == "command line"
    (issue,) = effective.issues
    assert issue.source == str(extra) and issue.key == "accelopt.search.plansPerCandidate"


def test_profile_of_several_files_refuses_a_kernel_name_and_mixed_projects(
    tmp_path: Path, capsys
) -> None:
    # --kernel names one file's kernel; a file of a project with other settings would be
    # evaluated with the first project's: each is a usage error (2) naming the cause, before
    # anything is evaluated
    first, second = tmp_path / "a" / "k.py", tmp_path / "b" / "k.py"
    for path in (first, second):
        path.parent.mkdir()
        path.write_text("def broken(:\n")
    assert main(["profile", str(first), str(first), "--kernel", "x"]) == 2
    assert "--kernel applies to one path" in capsys.readouterr().err
    (second.parent / "accelopt.toml").write_text("[evaluation]\nseeds = 2\n")
    assert main(["profile", str(first), str(second)]) == 2
    err = capsys.readouterr().err
    assert f"{second}: its project's settings differ from those of {first}" in err


def test_profile_json_of_several_files_is_a_list_in_their_order(tmp_path: Path, capsys) -> None:
    # files that cannot be evaluated are entries with the located message, in the order given,
    # and the run exits 1; no target is started for them
    broken = tmp_path / "broken.py"
    broken.write_text("import triton\ndef broken(:\n")
    missing = tmp_path / "missing.py"
    assert main(["profile", "--json", str(missing), str(broken)]) == 1
    out = capsys.readouterr()
    reports = json.loads(out.out)
    assert [r["path"] for r in reports] == [str(missing), str(broken)]
    assert f"{missing}:1:1: no such file" in reports[0]["error"]
    assert f"{broken}:2:12: error: syntax error" in reports[1]["error"]
    assert out.err.index(f"{missing}:1:1") < out.err.index(f"{broken}:2:12")
