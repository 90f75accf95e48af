"""The evaluation cache never hands an NKI result measured one way to a target that runs NKI
another way: the target fingerprint (part of the key) carries the NKI stack its probe reports
(SDK and version, ``nki-simulated`` for ``nki.simulate`` on CPU or ``nki-device`` on Trainium).

The Neuron SDK here is the test double in tests/doubles (the real one cannot be installed); it
is put on the path of the worker subprocesses only (tests/nki/conftest.py's environments)."""

from __future__ import annotations

from pathlib import Path

import pytest

from accelopt_core.evaluation import EvaluationCache, Evaluator
from accelopt_core.evaluation.cache import cache_key
from accelopt_core.onsite.protocol import EvalRequest
from accelopt_core.settings import Settings
from accelopt_core.targets.base import nki_tag
from accelopt_core.targets.local import LocalTarget
from accelopt_core.targets.ray import nki_stack
from tests import hermetic
from tests.nki.conftest import EXAMPLES, device_env, double_env

TENSOR_ADD = (EXAMPLES / "tensor_add.py").read_text()
SIMULATED = {"nki": "0.7.0", "nki_api": "nki", "nki_mode": "simulated"}


def settings() -> Settings:
    ev = {"seeds": 2, "repMs": 5.0, "warmupMs": 1.0, "timeoutS": 90.0, "warmWorkers": False}
    return Settings.model_validate({"evaluation": ev})


def use_env(monkeypatch: pytest.MonkeyPatch, env: dict[str, str]) -> None:
    """Make ``env`` this process's environment (the workers inherit it)."""
    for key in ("ACCELOPT_NKI_MODE", "NKI_DOUBLE_DEVICE", "NEURON_PLATFORM_TARGET_OVERRIDE"):
        monkeypatch.delenv(key, raising=False)
    for key, value in env.items():
        monkeypatch.setenv(key, value)


def test_nki_tag_names_sdk_mode_platform_and_lnc() -> None:
    assert nki_tag(None) == nki_tag({}) == ""  # no SDK: fingerprints as before
    assert nki_tag(SIMULATED) == ":nki-0.7.0:nki-simulated"
    device = {**SIMULATED, "nki_mode": "device", "neuron_platform": "trn2", "lnc": "2"}
    assert nki_tag(device) == ":nki-0.7.0:nki-device:trn2:lnc-2"
    legacy = {"neuronxcc": "2.21.1", "nki_api": "neuronxcc.nki", "nki_mode": "simulated"}
    assert nki_tag(legacy) == ":neuronxcc-2.21.1:nki-simulated"
    # a stack without a mode (an older worker) matches no probed one
    assert nki_tag({"nki": "0.7.0", "nki_api": "nki"}) == ":nki-0.7.0:nki-mode-unknown"
    # Ray: the worker's report wins; else rebuilt from the versions of a result
    assert nki_stack({"nki": "0.7.0", "nki_api": "nki"}, SIMULATED) is SIMULATED
    assert nki_stack({"nki": "0.7.0", "nki_api": "nki"}, None, "device")["nki_mode"] == "device"
    assert nki_stack({"torch": "2.5"}, None, "device") == {}


def test_fingerprints_differing_only_in_nki_mode_or_sdk_give_different_keys() -> None:
    request = EvalRequest(candidate_source=TENSOR_ADD, harness_source=TENSOR_ADD, entry="k")
    base = "local:cpu:torch-2.5.0:triton-3.1.0"
    stacks = [
        SIMULATED,
        {**SIMULATED, "nki_mode": "device"},
        {**SIMULATED, "nki": "0.6.0"},
        {"neuronxcc": "2.21.1", "nki_api": "neuronxcc.nki", "nki_mode": "simulated"},
        {**SIMULATED, "nki_mode": "device", "neuron_platform": "trn2"},
    ]
    keys = {cache_key(request, base + nki_tag(stack)) for stack in stacks}
    assert len(keys) == len(stacks)


@pytest.mark.skipif(
    hermetic.sdk_installed(), reason="a Neuron SDK is installed in site-packages (cannot be hidden)"
)
def test_local_fingerprint_without_an_sdk_names_no_nki(monkeypatch: pytest.MonkeyPatch) -> None:
    # tests/hermetic.py takes an SDK on PYTHONPATH (the double, or a real one) off the session's
    # paths, so the workers find none here
    use_env(monkeypatch, {})
    plain = LocalTarget(settings())
    assert "nki" not in plain.fingerprint and plain.nki_stack == {}


def test_local_fingerprint_follows_what_the_workers_find(monkeypatch: pytest.MonkeyPatch) -> None:
    use_env(monkeypatch, {})
    plain = LocalTarget(settings())
    base = plain.fingerprint.removesuffix(nki_tag(plain.nki_stack))  # "" where no SDK is found
    use_env(monkeypatch, double_env())
    simulated = LocalTarget(settings())
    assert simulated.nki_stack["nki_mode"] == "simulated"
    assert simulated.fingerprint == base + ":nki-0.3.0+double:nki-simulated"
    use_env(monkeypatch, device_env(Path("/nonexistent")))
    device = LocalTarget(settings())
    assert device.fingerprint == base + ":nki-0.3.0+double:nki-device:trn1"


async def test_a_cached_simulated_result_is_not_returned_on_trainium(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    cache = EvaluationCache(tmp_path / "evals")
    s = settings()

    async def evaluate(env: dict[str, str]) -> tuple[Evaluator, object]:
        use_env(monkeypatch, env)
        target = LocalTarget(s)
        evaluator = Evaluator(target, s, cache)
        try:
            result = await evaluator.evaluate(TENSOR_ADD, TENSOR_ADD, "tensor_add")
        finally:
            await target.close()
        return evaluator, result

    first, simulated = await evaluate(double_env())
    assert simulated.status == "ok" and simulated.timing == "simulated", simulated.message
    assert first.stats["evaluations"] == 1
    again, hit = await evaluate(double_env())  # the same stack: the cache answers
    assert hit.cached and again.stats == {**again.stats, "evaluations": 0, "cache_hits": 1}
    trn, on_device = await evaluate(device_env(tmp_path, "0.001"))
    assert trn.stats["cache_hits"] == 0 and trn.stats["evaluations"] == 1
    assert not on_device.cached and on_device.timing == "neuron", on_device.message
