"""Issue 53, items 4 and 5: no shared compile cache is writable from a candidate, and a candidate
that writes a file during its evaluation (in its scratch directory or where the sandbox refused
it) is rejected, naming the path.

The candidates are sent with themselves as the gate's baseline (the gate judges only what a
candidate changes, tests/onsite/runs.py ``gate_baseline``): what they do reaches the sandbox and
the judge, whatever the static gate would say of it.
"""

from __future__ import annotations

import json
import os
import pwd
import uuid
from pathlib import Path

import pytest

from accelopt_core.onsite.protocol import EvalRequest
from accelopt_core.onsite.sandbox import caches, environment, landlock, writes
from accelopt_core.onsite.sandbox.environment import OFF_VAR
from tests.onsite.runs import BASE, WarmRunner
from tests.onsite.test_sandbox import attempt, in_child, needs_landlock, write

HOME = pwd.getpwuid(os.getuid()).pw_dir


def body(call: str, top: str = "") -> str:
    """The add fixture with ``call`` (statements, indented by 4) run at the start of each call
    of the entry, and ``top`` at module level."""
    src = BASE.replace(
        "def add(x, y):\n",
        "def add(x, y):\n" + "".join(f"    {line}\n" for line in call.splitlines()),
    )
    return src.replace("import torch\n", "import torch\n" + top + "\n", 1)


def evaluate(runner: WarmRunner, candidate: str, **fields):
    """One evaluation of ``candidate`` (its own gate baseline) through ``runner``."""
    request = EvalRequest(
        candidate_source=candidate,
        baseline_source=candidate,
        harness_source=BASE,
        entry="add",
        seeds=[1],
        rep_ms=2.0,
        timeout_s=90.0,
        **fields,
    )
    return runner.run(request)


@pytest.fixture(scope="module")
def worker(tmp_path_factory):
    """A warm worker with its shared compile caches in a directory of this test's
    (``XDG_CACHE_HOME``): ``(runner, cache root)``."""
    xdg = tmp_path_factory.mktemp("xdg")
    env = {k: v for k, v in os.environ.items() if not k.startswith("ACCELOPT_")}
    env.pop("TRITON_CACHE_DIR", None)
    env["XDG_CACHE_HOME"] = str(xdg)
    runner = WarmRunner(env=env)
    yield runner, Path(environment.cache_root(env))
    runner.close()


# --- item 5: writes in the scratch directory --------------------------------------------------


def test_a_write_to_the_scratch_home_during_the_call_is_rejected_naming_it(worker) -> None:
    runner, _ = worker
    res = evaluate(
        runner, body("open(os.path.expanduser('~/probe.wav'), 'wb').write(b'RIFF')", "import os")
    )
    assert res.status == "rejected" and res.rule == writes.WRITE_RULE, res.message
    assert res.message.startswith("wrote ~/probe.wav during the call"), res.message


def test_a_write_only_in_the_temporary_directory_is_rejected_naming_it(worker) -> None:
    runner, _ = worker
    call = "fd, p = tempfile.mkstemp(suffix='.npy'); os.close(fd)"
    res = evaluate(runner, body(call, "import os, tempfile"))
    assert res.status == "rejected" and res.rule == writes.WRITE_RULE, res.message
    assert res.message.startswith("wrote $TMPDIR/tmp") and ".npy during the call" in res.message


def test_a_write_at_load_time_is_rejected_as_such(worker) -> None:
    runner, _ = worker
    res = evaluate(runner, body("", "import os\nos.mkdir('state')"))
    assert res.status == "rejected" and res.rule == writes.WRITE_RULE, res.message
    assert res.message.startswith("wrote ~/state while loading"), res.message


def test_a_removal_is_rejected_naming_what_was_removed(worker) -> None:
    runner, _ = worker
    res = evaluate(runner, body("os.rmdir(tempfile.gettempdir())", "import os, tempfile"))
    assert res.status == "rejected" and res.rule == writes.WRITE_RULE, res.message
    assert res.message.startswith("removed $TMPDIR during the call"), res.message


@needs_landlock
def test_a_refused_write_to_the_home_directory_is_rejected_even_when_caught(worker) -> None:
    """The real home is out of the sandbox's reach: the write fails, the candidate catches the
    error and returns a correct result, and is rejected all the same."""
    runner, _ = worker
    target = os.path.join(HOME, f"accelopt-probe-{uuid.uuid4().hex[:8]}.wav")
    call = f"try:\n    open({target!r}, 'wb').write(b'RIFF')\nexcept OSError:\n    pass"
    try:
        res = evaluate(runner, body(call))
        assert res.status == "rejected" and res.rule == writes.WRITE_RULE, res.message
        assert res.message.startswith(f"tried to write {target} during the call"), res.message
        assert "(refused)" in res.message
        assert not os.path.exists(target)
    finally:
        if os.path.exists(target):
            os.unlink(target)


@needs_landlock
def test_a_mode_change_outside_the_scratch_directory_is_refused_and_rejected(
    worker, tmp_path: Path
) -> None:
    """Landlock governs no chmod, chown or utime: the judge's guard refuses them outside the
    evaluation's directories, and rejects the candidate."""
    runner, _ = worker
    target = tmp_path / "key"
    target.write_text("secret")
    target.chmod(0o600)
    call = f"try:\n    os.chmod({str(target)!r}, 0o644)\nexcept OSError:\n    pass"
    res = evaluate(runner, body(call, "import os"))
    assert res.status == "rejected" and res.rule == writes.WRITE_RULE, res.message
    assert res.message.startswith(f"tried to write {target} during the call"), res.message
    assert target.stat().st_mode & 0o777 == 0o600


#: Module-level code that writes only where Triton compiles (the compile stage, and the user's
#: GPU once applied), not under the interpreter that runs the candidate process here.
COMPILED_ONLY = """import os
if not os.environ.get("TRITON_INTERPRET"):
    try:
        open(os.path.expanduser({path!r}), "wb").close()
    except OSError:
        pass
"""


def test_a_write_only_when_compiled_is_seen_in_the_compile_stage(worker) -> None:
    runner, _ = worker
    res = evaluate(runner, body("", COMPILED_ONLY.format(path="~/probe.wav")))
    assert res.status == "rejected" and res.rule == writes.WRITE_RULE, res.message
    assert res.message.startswith("wrote ~/probe.wav in the compile stage"), res.message


@needs_landlock
def test_a_refused_write_only_when_compiled_is_rejected_too(worker) -> None:
    runner, _ = worker
    target = os.path.join(HOME, f"accelopt-probe-{uuid.uuid4().hex[:8]}.wav")
    try:
        res = evaluate(runner, body("", COMPILED_ONLY.format(path=target)))
        assert res.status == "rejected" and res.rule == writes.WRITE_RULE, res.message
        assert res.message.startswith(f"tried to write {target} in the compile stage")
        assert not os.path.exists(target)
    finally:
        if os.path.exists(target):
            os.unlink(target)


def test_a_candidate_that_writes_nothing_passes(worker) -> None:
    runner, _ = worker
    res = evaluate(runner, BASE)
    assert res.status == "ok", res.message


# --- item 4: the compile caches --------------------------------------------------------------

PLANT = "accelopt-planted"
KEY = "5eed" * 16  # a hex key, as Triton's hashes are

#: Plants through Triton's cache manager (a group of the key ``planted``, as a compiled kernel
#: has) and by plain writes into every cache directory the environment names.
PLANTER = f"""
import triton.runtime.cache as _cache
def _plant():
    import os
    group = _cache.get_cache_manager("{KEY}")
    path = group.put(b"\\x7fELF", "{PLANT}.so")
    group.put_group("{PLANT}", {{"{PLANT}.so": path}})
    for var in ("TRITON_CACHE_DIR", "ACCELOPT_SHARED_TRITON_CACHE", "CUDA_CACHE_PATH",
                "XDG_CACHE_HOME"):
        base = os.environ.get(var)
        if base:
            try:
                with open(os.path.join(base, "{PLANT}.txt"), "w") as f:
                    f.write("planted")
            except OSError:
                pass
"""

#: Raises (a failed evaluation, a warning from the compile stage) when any plant is visible.
SEEKER = f"""
import triton.runtime.cache as _cache
def _seek():
    import os
    group = _cache.get_cache_manager("{KEY}")
    seen = [group.get_file("{PLANT}.so"), group.get_group("{PLANT}")]
    for var in ("TRITON_CACHE_DIR", "ACCELOPT_SHARED_TRITON_CACHE", "CUDA_CACHE_PATH"):
        base = os.environ.get(var)
        if base and os.path.exists(os.path.join(base, "{PLANT}.txt")):
            seen.append(var)
    if any(seen):
        raise RuntimeError(f"saw the plant: {{seen}}")
_seek()
"""


def planted_files(root: Path) -> list[str]:
    return sorted(str(p) for p in root.rglob(f"{PLANT}*")) if root.exists() else []


def test_a_plant_in_the_compile_cache_reaches_no_later_evaluation_nor_compile_stage(
    worker,
) -> None:
    runner, root = worker
    planted = evaluate(runner, body("_plant()", PLANTER))
    # the cache manager's writes land in the evaluation's own cache (discarded with it); a
    # plain write into the shared cache is refused and named
    assert planted.status == "rejected" and planted.rule == writes.WRITE_RULE, planted.message
    assert "tried to write" in planted.message and PLANT in planted.message
    assert planted_files(root) == []
    # the seeker runs at import in the candidate process and in the compile stage
    seen = evaluate(runner, SEEKER + BASE)
    assert seen.status == "ok", seen.message
    assert not any("saw the plant" in w for w in seen.warnings), seen.warnings
    assert "gpu" in seen.metrics, sorted(seen.metrics)  # the compile stage did run
    assert planted_files(root) == []


def test_a_plant_made_with_the_sandbox_off_still_stays_in_its_evaluation(tmp_path: Path) -> None:
    """Without the filesystem confinement nothing stops a plain write into the shared cache
    (the evaluation warns); Triton's own cache manager still writes only the evaluation's."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("ACCELOPT_")}
    env.pop("TRITON_CACHE_DIR", None)
    env.update({"XDG_CACHE_HOME": str(tmp_path), OFF_VAR: "landlock,bwrap"})
    runner = WarmRunner(env=env)
    try:
        root = Path(environment.cache_root(env))
        planted = evaluate(runner, body("_plant()", PLANTER.replace("ACCELOPT_SHARED", "NONE")))
        assert planted.status == "ok", planted.message
        assert planted_files(root) == []
    finally:
        assert runner.close() == 0


def test_the_layered_manager_reads_the_shared_cache_and_writes_its_own(
    tmp_path: Path, monkeypatch
) -> None:
    shared, own = tmp_path / "shared", tmp_path / "own"
    (shared / "k").mkdir(parents=True)
    (shared / "k" / "a.bin").write_bytes(b"shared")
    (shared / "k" / "__grp__g").write_text(
        json.dumps({"child_paths": {"a.bin": str(shared / "k" / "a.bin")}})
    )
    monkeypatch.setenv("TRITON_CACHE_DIR", str(own))
    monkeypatch.setenv(caches.SHARED_VAR, str(shared))
    group = caches.LayeredCacheManager("k")
    assert group.get_file("a.bin") == str(shared / "k" / "a.bin")
    assert group.get_group("g") == {"a.bin": str(shared / "k" / "a.bin")}
    path = group.put(b"own", "a.bin")
    assert path == str(own / "k" / "a.bin") and group.get_file("a.bin") == path  # its own first
    assert (shared / "k" / "a.bin").read_bytes() == b"shared"
    assert sorted(os.listdir(own / "k")) == ["a.bin"]  # no temporary directory left
    assert group.get_file("missing") is None and group.get_group("missing") is None
    # Triton takes it as a cache manager (a class whose bases include one named CacheManager)
    import triton.runtime.cache as tc

    monkeypatch.setenv(caches.MANAGER_VAR, f"{caches.__name__}:LayeredCacheManager")
    through_triton = tc.get_cache_manager(KEY)
    assert isinstance(through_triton, caches.LayeredCacheManager)
    assert through_triton.put(b"1", "b.bin").startswith(str(own) + "/")


def test_the_scratch_comparison_names_what_changed_and_leaves_out_the_machinerys(
    tmp_path: Path,
) -> None:
    root = tmp_path / "eval"
    dirs = {
        "root": str(root),
        "cwd": str(root / "cwd"),
        "tmp": str(root / "tmp"),
    }
    for d in ("cwd", "tmp"):
        (root / d).mkdir(parents=True)
    (root / "cwd" / "keep.txt").write_text("1")
    for name in writes.PEERS:
        writes.peer_dirs(dirs, name)
    watch = writes.Watch(dirs)
    # the evaluation's caches and the other processes' directories
    (Path(caches.private_root(dirs)) / "triton").mkdir(parents=True)
    (root / "stage" / "tmp" / "ptxas.log").write_text("")
    assert watch.seen("during the call") is None
    (root / "cwd" / "keep.txt").write_text("22")
    (root / "tmp" / "a").write_text("")
    assert watch.seen("during the call").startswith(
        "wrote ~/keep.txt, wrote $TMPDIR/a during the call"
    )
    os.utime(root / "cwd" / "keep.txt", ns=(1, 1))
    assert watch.seen("during the call").startswith("wrote ~/keep.txt during the call")
    (root / "cwd" / "keep.txt").unlink()
    assert watch.seen("during the timed calls").startswith("removed ~/keep.txt during the timed")
    assert watch.seen("during the call") is None  # reported once


@needs_landlock
def test_the_judges_second_ruleset_narrows_writes_to_its_own_evaluation(tmp_path: Path) -> None:
    scratch, mine, other = (
        tmp_path / "scratch",
        tmp_path / "scratch" / "mine",
        tmp_path / "scratch" / "other",
    )
    for d in (mine, other):
        d.mkdir(parents=True)

    def confined() -> dict:
        fd = landlock.ruleset([str(tmp_path)], [str(scratch)])
        landlock.enforce(fd)
        os.close(fd)
        fd = landlock.writes_ruleset([str(mine)])
        landlock.enforce(fd)
        os.close(fd)
        return {
            "mine": attempt(write(mine / "f")),
            "other": attempt(write(other / "f")),
            "read other": attempt(lambda: os.listdir(other)),
        }

    assert in_child(confined) == {"mine": "ok", "other": "EACCES", "read other": "ok"}
