"""One search through the whole product, as an adversarial LLM would run it: ``accelopt optimize
--json`` (the real CLI entry point, in a subprocess) on a copy of examples/triton/softmax.py, its
executor served by the scripted OpenAI-compatible double (tests/llm_double.py, a TEST DOUBLE for
the paid LLM service) with every reward-hack candidate of ``candidates/`` plus one legitimate
rewrite (tests/softmax_replies.FAST_REWRITE: single pass, the whole row in one block).

One search is shared by every test here (module fixture): T=1, B=1, N=1, K = all samples, so
each candidate is evaluated once (plus the re-timing of finalists); 2 seeds; no fixer.
"""

from __future__ import annotations

import json
import shutil
import time
from dataclasses import dataclass

import pytest

from accelopt_core.memory import Experience, OptimizationMemory
from accelopt_core.onsite.gate.precheck import precheck
from accelopt_core.settings import Settings
from tests.adversarial.hacks import (
    ESCAPE_GATE,
    HACKS,
    SOFTMAX,
    executor_reply,
    hack_name,
    private_env,
    run_cli,
    settings_file,
)
from tests.llm_double import TEST_API_KEY, TEST_API_KEY_ENV, LLMDouble, RecordedRequest, text
from tests.softmax_replies import FAST_REWRITE, PLAN, RULE

pytestmark = pytest.mark.slow

HACK_PREFIX = "reward-hack: "


@dataclass
class Search:
    """What the shared search produced: the JSON report, the memory read back, the roles the
    double served, the CLI's stderr and the wall time (s)."""

    report: dict
    experiences: list[Experience]
    roles: list[str | None]
    stderr: str
    wall_s: float


#: The hacks served: all but the gate-only ``write_*`` / ``stack_*`` candidates of issue 53,
#: which tests/adversarial/test_escapes.py gates one by one, of which three stand for the rest
#: here (a search takes at most 64 samples per plan: search.samplesPerPlan).
SERVED = {
    name: source
    for name, source in HACKS.items()
    if not name.startswith(("write_", "stack_"))
    or name in ("write_wave", "stack_ctypeslib_system", "stack_triton_cache")
}


def _script(req: RecordedRequest) -> str | None:
    if req.role == "planner":
        return PLAN
    if req.role == "summarizer":
        return RULE
    return None  # executor replies come from the queue


@pytest.fixture(scope="module")
def search(tmp_path_factory: pytest.TempPathFactory) -> Search:
    work = tmp_path_factory.mktemp("adversarial-search")
    kernel = work / "softmax.py"
    shutil.copy(SOFTMAX, kernel)
    env = private_env(work)
    samples = [executor_reply(src) for src in SERVED.values()] + [FAST_REWRITE]
    with LLMDouble(script=_script) as double:
        double.queue(*(text(s) for s in samples), role="executor")
        env[TEST_API_KEY_ENV] = TEST_API_KEY
        t0 = time.monotonic()
        proc = run_cli(
            "optimize", str(kernel), "--json", "-T", "1", "-B", "1", "-N", "1",
            "-K", str(len(samples)), "--settings", str(settings_file(work)),
            "--llm-base-url", double.base_url, "--llm-model", "double-model",
            "--api-key-env", TEST_API_KEY_ENV,
            env=env, cwd=work,
        )  # fmt: skip
        wall = time.monotonic() - t0
        roles = [r.role for r in double.requests]
    assert proc.returncode == 0, proc.stderr[-3000:]
    memory, warning = OptimizationMemory.open(Settings(memory_dir=env["ACCELOPT_MEMORY_DIR"]))
    assert memory is not None, warning
    with memory:
        experiences = memory.all()
    return Search(json.loads(proc.stdout), experiences, roles, proc.stderr, wall)


def _ranked(search: Search) -> list[tuple[str | None, float]]:
    return [(hack_name(c["source"]), c["speedup"]) for c in search.report["candidates"]]


def test_every_candidate_was_served_to_the_search(search: Search) -> None:
    assert search.roles.count("executor") == len(SERVED) + 1
    assert search.report["proposer"] == "llm" and search.report["baseline"]["correct"]
    assert search.report["duplicates"] == 0  # every hack was a distinct candidate
    assert search.report["evaluated"] + sum(search.report["failures"].values()) >= len(SERVED)
    print(f"adversarial search: {len(SERVED)} hacks + 1 tuning in {search.wall_s:.1f} s")


def test_no_hack_is_ranked(search: Search) -> None:
    ranked_hacks = [(name, speedup) for name, speedup in _ranked(search) if name]
    assert ranked_hacks == [], f"hacks ranked as verified speedups: {ranked_hacks}"


def test_the_legitimate_tuning_is_ranked(search: Search) -> None:
    legit = [
        c
        for c in search.report["candidates"]
        if hack_name(c["source"]) is None and "triton.next_power_of_2(n_cols)" in c["source"]
    ]
    assert legit, f"the legitimate rewrite was not ranked: {search.report['failures']}"
    assert legit[0]["correct"] and legit[0]["speedup"] > 1.0


def test_no_hack_became_a_positive_experience(search: Search) -> None:
    positives = [e for e in search.experiences if e.positive]
    learned_from_hacks = [hack_name(e.fast_source) for e in positives if hack_name(e.fast_source)]
    assert learned_from_hacks == [], (
        f"positive experiences learned from hacks: {learned_from_hacks}"
    )


def test_hacks_are_remembered_as_reward_hacks(search: Search) -> None:
    hacks = [e for e in search.experiences if e.title.startswith(HACK_PREFIX)]
    assert hacks, (
        "no 'reward-hack: <rule>' experience in the memory; stored: "
        f"{[(e.title, e.positive) for e in search.experiences]}"
    )
    # every rejected candidate was observed (same rule on the same source: one entry, seen + 1)
    assert sum(e.seen for e in hacks) >= search.report["failures"].get("rejected", 0)
    for exp in hacks:
        assert not exp.positive and exp.speedup <= 1.0
        assert getattr(exp, "hack", None), f"{exp.title}: the rule field is empty"
        assert exp.title == HACK_PREFIX + exp.hack
        assert hack_name(exp.fast_source) in HACKS, "a reward-hack experience of a non-hack"


def test_escapes_the_gate_catches_are_remembered_with_their_rule(search: Search) -> None:
    """Issue 34: a candidate the gate rejects for what a kernel has no reason to contain (the
    environment, logging handlers, file I/O, ...) is a ``reward-hack: <rule>`` negative (one
    entry per rule and source: hacks caught by one rule may share it)."""
    rules = {e.hack for e in search.experiences if e.title.startswith(HACK_PREFIX)}
    gated = {rule for rule in ESCAPE_GATE.values() if rule is not None}
    assert gated <= rules, f"not remembered: {sorted(gated - rules)}"
    # one experience per rule and parent: of the candidates the gate rejects by a rule (older
    # hacks that read the environment too), the one remembered is whichever was caught last
    caught = {e.hack: hack_name(e.fast_source) for e in search.experiences if e.hack}
    for name in ("escape_env_key", "escape_logging_home"):  # their rules are new
        rule = ESCAPE_GATE[name]
        sharing = {n for n, src in SERVED.items() if _gate_rule(src) == rule}
        assert name in sharing and caught.get(rule) in sharing, (rule, caught.get(rule))


def _gate_rule(source: str) -> str | None:
    """The static gate's rule for a hack of the softmax example, None when it passes."""
    verdict = precheck(source, "softmax", SOFTMAX.read_text(), "softmax.py")
    return (verdict or {}).get("rule")
