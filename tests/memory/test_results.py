"""Tests of accelopt_core.memory.results: the search-results store on a real directory."""

from __future__ import annotations

from pathlib import Path

import pytest

from accelopt_core.memory import ResultsStore
from accelopt_core.settings import Settings
from tests.memory.experiences import SOFTMAX


def test_results_store_round_trip(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    store, warning = ResultsStore.open(Settings(memory_dir=str(tmp_path)))
    assert warning is None and store is not None
    assert store.directory == tmp_path / "results"
    kernel_file = tmp_path / "softmax.py"
    report = {"kernel_name": "softmax_kernel", "candidates": [{"id": "c1", "speedup": 1.7}]}
    store.save(str(kernel_file), "softmax_kernel", SOFTMAX, report)
    assert store.load(str(kernel_file), "softmax_kernel", SOFTMAX) == report
    monkeypatch.chdir(tmp_path)
    assert store.load("softmax.py", "softmax_kernel", SOFTMAX) == report  # relative path
    # formatting and comments do not change the fingerprint
    assert store.load(str(kernel_file), "softmax_kernel", SOFTMAX + "\n# a comment\n") == report
    store.close()
    reopened = ResultsStore(tmp_path / "results")  # survives a restart
    assert reopened.load(str(kernel_file), "softmax_kernel", SOFTMAX) == report
    assert reopened.remove(str(kernel_file), "softmax_kernel", SOFTMAX) is True
    assert reopened.load(str(kernel_file), "softmax_kernel", SOFTMAX) is None
    reopened.close()


def test_results_store_source_change_and_other_keys(tmp_path: Path):
    store = ResultsStore(tmp_path / "results")
    path = str(tmp_path / "k.py")
    store.save(path, "softmax_kernel", SOFTMAX, {"best": 1})
    changed = SOFTMAX.replace("num / den", "num * (1.0 / den)")
    assert store.load(path, "softmax_kernel", changed) is None
    assert store.load(path, "other_kernel", SOFTMAX) is None
    assert store.load(str(tmp_path / "elsewhere.py"), "softmax_kernel", SOFTMAX) is None
    store.save(path, "softmax_kernel", changed, {"best": 2})
    assert store.load(path, "softmax_kernel", SOFTMAX) == {"best": 1}
    assert store.load(path, "softmax_kernel", changed) == {"best": 2}
    with pytest.raises(TypeError):
        store.save(path, "softmax_kernel", SOFTMAX, {"bad": object()})
    assert store.load(path, "softmax_kernel", SOFTMAX) == {"best": 1}
    other = str(tmp_path / "other.py")
    store.save(other, "softmax_kernel", SOFTMAX, {"best": 3})
    assert store.clear(path) == 2  # both sources of k.py, not other.py
    assert store.load(path, "softmax_kernel", changed) is None
    assert store.load(other, "softmax_kernel", SOFTMAX) == {"best": 3}
    assert store.clear() == 1 and store.load(other, "softmax_kernel", SOFTMAX) is None
    store.close()


def test_a_report_of_an_older_judge_is_not_offered_again(tmp_path: Path):
    """A report saved before reports recorded the judge version (judge 1) is not returned: its
    ranking may hold candidates today's judge rejects."""
    import diskcache

    from accelopt_core.onsite.protocol import JUDGE_VERSION

    store = ResultsStore(tmp_path / "results")
    path = str(tmp_path / "k.py")
    store.save(path, "softmax_kernel", SOFTMAX, {"best": 1})
    assert store.load(path, "softmax_kernel", SOFTMAX) == {"best": 1}
    store.close()
    with diskcache.Cache(str(tmp_path / "results")) as cache:
        [key] = [k for k in cache.iterkeys() if str(k).startswith("report")]
        entry = cache.get(key)
        assert entry["judge_version"] == JUDGE_VERSION
        del entry["judge_version"]  # as the store wrote it before
        cache.set(key, entry)
    reopened = ResultsStore(tmp_path / "results")
    assert reopened.load(path, "softmax_kernel", SOFTMAX) is None
    reopened.close()
