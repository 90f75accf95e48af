"""An :class:`Experience`: one slow->fast rewrite of a kernel with the summarizer's reusable rule
(AccelOpt, arXiv 2511.15915, section "optimization memory"); negative experiences record rewrites
that were correct but slower.

Also here: the stable id of an experience (:func:`experience_id`), the merge of a repeated
observation into a stored one (:func:`merge`) and the JSON-lines export format
(:func:`write_jsonl`, :func:`read_jsonl`).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import os
import re
import tempfile
import time
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from accelopt_core.kernelfile import source_fingerprint as _source_fingerprint
from accelopt_core.onsite.protocol import JUDGE_VERSION

__all__ = [
    "HACK_PREFIX",
    "HOST_TIMINGS",
    "LEGACY_JUDGE_VERSION",
    "Experience",
    "experience_id",
    "judge_key",
    "merge",
    "read_jsonl",
    "timing_label",
    "write_jsonl",
]

#: Timing modes measured on the host's CPU (the Triton interpreter, the NKI simulator): their
#: latencies say nothing about GPU or Trainium speed, so their experiences never steer a search
#: on hardware (:meth:`accelopt_core.memory.OptimizationMemory.retrieve_for`).
HOST_TIMINGS = frozenset({"interpreter", "simulated"})
#: Title prefix of an experience learned from a candidate the judge caught (issue 10).
HACK_PREFIX = "reward-hack: "
#: The judge version of experiences stored before experiences recorded one.
LEGACY_JUDGE_VERSION = "1"

_STR_FIELDS = (
    "id",
    "backend",
    "device",
    "timing",
    "kernel_name",
    "source_fingerprint",
    "slow_source",
    "fast_source",
    "title",
    "rule",
)
_OPTIONAL_FIELDS = (
    "seen",
    "plan",
    "updated_at",
    "hack",
    "judge_version",
    "gpu_facts",
    "reason",
)


def timing_label(timing: str) -> str:
    """How an experience's timing is labelled where it is shown: ``"interpreter-timed"``,
    ``"simulator-timed"`` for :data:`HOST_TIMINGS`, else ``""`` (hardware or unknown timing)."""
    return {"interpreter": "interpreter-timed", "simulated": "simulator-timed"}.get(timing, "")


def judge_key(version: str) -> tuple[int, int | str]:
    """Sort key of a judge version (``"2"`` > ``"1"``; numeric versions before others)."""
    return (0, int(version)) if version.isdigit() else (1, version)


def _normalize_title(title: str) -> str:
    return " ".join(title.lower().split())


def experience_id(backend: str, source_fingerprint: str, title: str, positive: bool) -> str:
    """Stable id of an experience: the first 16 hex digits of sha256 over (backend, fingerprint
    of the slow source, title with case and whitespace normalized, positive).

    The same rule observed again on the same kernel source gets the same id, so it is merged.
    """
    key = "\x1f".join([backend, source_fingerprint, _normalize_title(title), str(bool(positive))])
    return hashlib.sha256(key.encode("utf-8")).hexdigest()[:16]


@dataclass(repr=False)
class Experience:
    """One slow->fast rewrite of a kernel with its reusable rule (one item of the memory).

    Attributes:
        id: 16 hex digits, :func:`experience_id` of (backend, source_fingerprint, title, positive).
        backend: ``"triton"`` or ``"nki"``.
        device: device name the speedup was measured on (``"NVIDIA H100 80GB HBM3"``, ``"cpu"``).
        timing: how it was timed: ``"cuda"``, ``"interpreter"`` (says nothing about a GPU),
            ``"neuron"``.
        kernel_name: name of the kernel that was rewritten.
        source_fingerprint: fingerprint of the slow source
            (:func:`accelopt_core.kernelfile.source_fingerprint`).
        slow_source / fast_source: full module sources before and after the rewrite.
        speedup: slow latency / fast latency (dimensionless; <= 1 for negatives).
        title: short name of the rewrite; rule: the summarizer's reusable rule.
        positive: True when the rewrite made the kernel faster.
        created_at: unix time (s) of the first observation.
        seen: how often this rule was observed on this source (merged on add).
        plan: the plan text the rewrite implemented.
        updated_at: unix time (s) of the latest observation (0: same as ``created_at``).
        hack: for a candidate the judge caught (``EvalResult.rule``, e.g. ``"timing
            inconsistent"``): that rule; the experience is then a negative titled
            ``reward-hack: <rule>`` and shown to the planner as a "do not" example. None for
            an ordinary experience.
        judge_version: :data:`~accelopt_core.onsite.protocol.JUDGE_VERSION` of the judge that
            verified the observation; ``"1"`` (:data:`LEGACY_JUDGE_VERSION`) for experiences
            stored before experiences recorded it (``accelopt memory recheck`` lists those).
        gpu_facts: what the rewrite did on the GPU the kernels were compiled for (issue 21):
            ``{"before": ..., "after": ...}``, each
            :func:`accelopt_core.devicefacts.compact_facts` of the slow and the fast result
            (``arch``, ``device``, per kernel ``registers``, ``spill_bytes``, ``shared_bytes``,
            ``occupancy`` %, ``limiter``, SASS counts); ``{}`` when neither was compiled.
        reason: for a negative experience, why the rewrite failed, in full (issue 30): the
            judge's message for a reward hack (``gate: <rule>: <message>``), the measured
            slowdown for a correct but slower rewrite; ``""`` for a positive one.
    """

    id: str
    backend: str
    device: str
    timing: str
    kernel_name: str
    source_fingerprint: str
    slow_source: str
    fast_source: str
    speedup: float
    title: str
    rule: str
    positive: bool
    created_at: float
    seen: int = 1
    plan: str = ""
    updated_at: float = 0.0
    hack: str | None = None
    judge_version: str = LEGACY_JUDGE_VERSION
    gpu_facts: dict[str, Any] = field(default_factory=dict)
    reason: str = ""

    def __post_init__(self) -> None:
        if not self.updated_at:
            self.updated_at = self.created_at

    def __repr__(self) -> str:  # the sources would drown a log line
        sign = "+" if self.positive else "!" if self.hack else "-"
        return (
            f"Experience({self.id} {sign} {self.backend}/{self.kernel_name} "
            f"{self.speedup:.2f}x seen={self.seen} {self.title!r})"
        )

    @classmethod
    def create(
        cls,
        *,
        backend: str,
        device: str | None,
        timing: str | None,
        kernel_name: str,
        slow_source: str,
        fast_source: str,
        speedup: float,
        title: str,
        rule: str,
        positive: bool | None = None,
        plan: str = "",
        source_fingerprint: str | None = None,
        created_at: float | None = None,
        hack: str | None = None,
        judge_version: str = JUDGE_VERSION,
        gpu_facts: dict[str, Any] | None = None,
        reason: str = "",
    ) -> Experience:
        """A new experience with its id and timestamps filled in, judged by ``judge_version``
        (default: the current judge).

        ``positive`` defaults to ``speedup > 1``; ``source_fingerprint`` to the fingerprint of
        ``slow_source``; a missing device or timing is recorded as ``"unknown"``.
        Raises ValueError when the speedup is not a positive finite number, the title is empty,
        or a ``hack`` experience is positive.
        """
        if not isinstance(speedup, (int, float)) or not math.isfinite(speedup) or speedup <= 0:
            raise ValueError(f"speedup must be a positive finite number, got {speedup!r}")
        if not title or not title.strip():
            raise ValueError("an experience needs a non-empty title")
        fp = source_fingerprint or _source_fingerprint(slow_source)
        pos = bool(speedup > 1.0) if positive is None else bool(positive)
        if hack is not None and pos:
            raise ValueError("a reward-hack experience is never positive")
        now = time.time() if created_at is None else float(created_at)
        return cls(
            id=experience_id(backend, fp, title, pos),
            backend=backend,
            device=device or "unknown",
            timing=timing or "unknown",
            kernel_name=kernel_name,
            source_fingerprint=fp,
            slow_source=slow_source,
            fast_source=fast_source,
            speedup=float(speedup),
            title=title.strip(),
            rule=rule.strip(),
            positive=pos,
            created_at=now,
            seen=1,
            plan=plan,
            updated_at=now,
            hack=hack.strip() if hack is not None else None,
            judge_version=judge_version,
            gpu_facts=dict(gpu_facts or {}),
            reason=reason.strip(),
        )

    @property
    def score(self) -> float:
        """Evidence used for eviction and tie-breaks: ``seen x speedup``."""
        return self.seen * self.speedup

    def to_dict(self) -> dict[str, Any]:
        """A JSON-serializable dict with every field (the export format, one per line)."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Any) -> Experience:
        """Validate and build an experience from :meth:`to_dict` output.

        Unknown keys are ignored; ``seen``, ``plan``, ``updated_at``, ``hack`` (None),
        ``judge_version`` (``"1"``: records written before it existed), ``gpu_facts``
        (``{}``) and ``reason`` (``""``) are optional. Raises
        ValueError naming the first missing or mistyped field.
        """
        if not isinstance(data, dict):
            raise ValueError(f"expected a JSON object, got {type(data).__name__}")
        known = {f.name for f in fields(cls)}
        missing = sorted(known - set(_OPTIONAL_FIELDS) - data.keys())
        if missing:
            raise ValueError(f"missing field(s): {', '.join(missing)}")
        values = {k: v for k, v in data.items() if k in known}
        _check_types(values)
        _check_values(values)
        return cls(**values)


def _check_types(values: dict[str, Any]) -> None:
    """Raise ValueError for the first field of the wrong type; numbers become floats in place."""
    for name in _STR_FIELDS:
        if not isinstance(values[name], str):
            raise ValueError(f"field {name!r} must be a string")
    for name in ("plan", "judge_version", "reason"):
        if name in values and not isinstance(values[name], str):
            raise ValueError(f"field {name!r} must be a string")
    if values.get("hack") is not None and not isinstance(values["hack"], str):
        raise ValueError("field 'hack' must be a string or null")
    if "gpu_facts" in values and not isinstance(values["gpu_facts"], dict):
        raise ValueError("field 'gpu_facts' must be an object")
    if not isinstance(values["positive"], bool):
        raise ValueError("field 'positive' must be true or false")
    for name in ("speedup", "created_at", "updated_at"):
        if name in values:
            v = values[name]
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
                raise ValueError(f"field {name!r} must be a finite number")
            values[name] = float(v)


def _check_values(values: dict[str, Any]) -> None:
    """Raise ValueError for the first field whose value is out of range."""
    if values["speedup"] <= 0:
        raise ValueError("field 'speedup' must be > 0")
    seen = values.get("seen", 1)
    if isinstance(seen, bool) or not isinstance(seen, int) or seen < 1:
        raise ValueError("field 'seen' must be an integer >= 1")
    if not values["title"].strip():
        raise ValueError("field 'title' must not be empty")
    if not re.fullmatch(r"[0-9a-f]{16}", values["id"]):
        raise ValueError("field 'id' must be 16 lowercase hex digits")
    if values.get("hack") is not None and values["positive"]:
        raise ValueError("a reward-hack experience (field 'hack') cannot be positive")


def merge(old: Experience, new: Experience, *, add_seen: bool) -> Experience:
    """Merge a repeated observation into a stored experience (same id): the best speedup, the
    newest sources/rule/plan, ``seen`` summed (``add_seen``, a new observation) or the larger of
    both (an import of an exported memory). When the two were verified by different judges,
    the newer judge's observation decides the speedup and the judge version (a weaker judge's
    speedup is not trusted over a stricter one's)."""
    newer = new if new.updated_at >= old.updated_at else old
    if old.judge_version == new.judge_version:
        speedup = max(old.speedup, new.speedup)
    else:
        stricter = max(old, new, key=lambda e: judge_key(e.judge_version))
        speedup = stricter.speedup
    judged = max(old.judge_version, new.judge_version, key=judge_key)
    return Experience(
        id=old.id,
        backend=old.backend,
        device=newer.device,
        timing=newer.timing,
        kernel_name=newer.kernel_name,
        source_fingerprint=old.source_fingerprint,
        slow_source=newer.slow_source,
        fast_source=newer.fast_source,
        speedup=speedup,
        title=newer.title,
        rule=newer.rule or old.rule,
        positive=old.positive,
        created_at=min(old.created_at, new.created_at),
        seen=old.seen + new.seen if add_seen else max(old.seen, new.seen),
        plan=newer.plan or old.plan,
        updated_at=max(old.updated_at, new.updated_at),
        hack=newer.hack or old.hack,
        judge_version=judged,
        gpu_facts=newer.gpu_facts or old.gpu_facts,
        reason=newer.reason or old.reason,
    )


def write_jsonl(path: Path | str, exps: Iterable[Experience]) -> int:
    """Write each experience (:meth:`Experience.to_dict`) as one JSON line, atomically (a
    temporary file renamed over ``path``). Returns the count. Raises OSError when ``path``
    cannot be written."""
    target = Path(path).expanduser()
    fd, tmp = tempfile.mkstemp(prefix=".accelopt-export-", dir=str(target.parent or "."))
    count = 0
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            for e in exps:
                fh.write(json.dumps(e.to_dict(), ensure_ascii=False) + "\n")
                count += 1
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    return count


def read_jsonl(path: Path | str) -> list[Experience]:
    """The experiences of a JSON-lines file (:func:`write_jsonl` format), all validated.

    The id is derived from the fields (:func:`experience_id`), so hand-edited lines are keyed
    correctly. Blank lines are skipped. Raises ValueError listing the bad line numbers (1-based)
    with their reasons when any line is bad, OSError when the file cannot be read."""
    text = Path(path).expanduser().read_text(encoding="utf-8")
    good: list[Experience] = []
    bad: list[str] = []
    for lineno, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            good.append(_parse_line(line))
        except (ValueError, TypeError) as exc:
            bad.append(f"line {lineno}: {exc}")
    if bad:
        shown = "; ".join(bad[:10]) + (f"; ... {len(bad) - 10} more" if len(bad) > 10 else "")
        numbers = ", ".join(b.split(":", 1)[0].removeprefix("line ") for b in bad)
        raise ValueError(f"{path}: {len(bad)} bad line(s) ({numbers}), nothing imported: {shown}")
    return good


def _parse_line(line: str) -> Experience:
    data = json.loads(line)
    if isinstance(data, dict):  # the id is derived from the fields below
        data = {**data, "id": "0" * 16}
    exp = Experience.from_dict(data)
    exp.id = experience_id(exp.backend, exp.source_fingerprint, exp.title, exp.positive)
    return exp
