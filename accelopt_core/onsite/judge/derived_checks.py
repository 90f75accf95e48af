"""The judge's derived-input checks (issues 22 and 29): correctness checks, never timed.

Two modes, by the request's ``derived_inputs``:

- **None** (the baseline's evaluation, and ``accelopt profile``): :func:`find_usable` asks the
  reference process for the derived inputs of the first correctness seed's inputs
  (:mod:`.derived_inputs`: shapes, values and layouts combined into slots; of the first
  ``BENCH["shapes"]`` entry when there are several), gives each slot one of the other
  correctness seeds to be made from (:func:`slot_seeds`), then, for each one, the reference on
  it and the evaluated code's output. A derived input is **used** when the reference runs on it
  (and stays finite where it changes values) and the evaluated code (the baseline: the oracle
  of what the kernel is meant to support) is correct on it; a slot the baseline is not correct
  on is split and its parts checked one by one; what is left is **skipped**, with the reason
  (the reference raises or overflows, the baseline is wrong on it or fails on it). Nothing
  here fails the evaluation: a baseline written for one shape or one value range keeps working.
- **a list** (a candidate's evaluation: the baseline's ``used`` list, copied by the host):
  :func:`check_listed` checks the candidate on exactly these; a candidate wrong on one is
  ``incorrect`` with the message ``wrong on derived input x + 512 (offset) (x: 16×64):
  <compare's message>`` (``derived shape`` for a shape alone, as in issue 22); a crash, a
  rejection or a timeout there keeps its status and names the derived input. The candidate's
  plain correctness check then skips the seeds its derived inputs are made from, but the first
  (:func:`derived_seeds`): each seed is checked once, plain or derived, and the derived inputs
  cost about the seeds they replace.

Both return ``metrics["derived_inputs"]``: ``{"used": [descriptor, ...], "skipped": [{"name",
"why"}, ...]}`` (descriptors of :mod:`.derived_inputs`, with the ``seed`` and ``shape`` they
were made from); the backend adds ``"seconds"``, their wall time on the judge's clock (the cost
``benchmarks/derived_inputs.py`` measures). The checking itself is the backend's (``check(case,
where)``, which raises :class:`~..runtime.failures.Failure`); the reference's side is
:class:`.judge.reference.Reference`'s ``derived_plan`` / ``derived_case`` (the NKI evaluation
has its own, in process). Standard library only.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from ..runtime.failures import Failure
from . import derived_inputs

#: How ``EvalResult.rule`` starts for a candidate wrong on a derived input (status
#: ``incorrect``), followed by the derived input's name (``wrong on derived input x + 532
#: (offset)``): the search remembers it as a negative experience with the judge's message,
#: one per derived input (issue 29).
DERIVED_RULE = "wrong on derived input"
#: Longest reason kept in ``skipped``.
_MAX_WHY = 400


class Unusable(Exception):
    """The reference process could not make a derived input's case (its reference raises or
    overflows on it, or the derivation does not apply to the inputs): it is skipped with this
    reason, a whole sentence (``the reference raises on it: ...``)."""


def clean_plan(plan) -> dict:
    """The reference process's plan (:func:`.derived_inputs.plan`) as data: descriptors
    through :func:`.derived_inputs.checked` (malformed ones dropped), skip entries as short
    strings."""
    plan = plan if isinstance(plan, dict) else {}
    raw = plan.get("derived") if isinstance(plan.get("derived"), list) else []
    limit = derived_inputs.MAX_DESCRIPTORS
    found = [d for d in (derived_inputs.checked(r, 1 << 16) for r in raw[:limit]) if d]
    skipped = plan.get("skipped") if isinstance(plan.get("skipped"), list) else []
    return {
        "derived": found,
        "skipped": [
            {"name": str(s.get("name"))[:200], "why": str(s.get("why"))[:_MAX_WHY]}
            for s in skipped[:64]
            if isinstance(s, dict)
        ],
        "signature": _clean_signature(plan.get("signature")),
        "symbols": _clean_symbols(plan.get("symbols")),
    }


def _clean_signature(raw) -> list[dict]:
    """The plan's ``signature`` (:func:`.derived_inputs.signature`) as checked data."""
    out = []
    for row in raw[:64] if isinstance(raw, list) else []:
        if not isinstance(row, dict):
            return []
        shape = row.get("shape")
        clean = {
            "name": str(row.get("name"))[:40],
            "kind": str(row.get("kind"))[:10],
            "floating": row.get("floating") is True,
        }
        if isinstance(row.get("dtype"), str):
            clean["dtype"] = row["dtype"][:20]
        if isinstance(shape, list) and all(type(n) is int and n >= 0 for n in shape[:8]):
            clean["shape"] = shape[:8]
        out.append(clean)
    return out


def _clean_symbols(raw) -> list[dict]:
    """The plan's ``symbols`` (:func:`.derived_inputs.searchable_symbols`) as checked data."""
    out = []
    for row in raw[:8] if isinstance(raw, list) else []:
        dims = row.get("dims") if isinstance(row, dict) else None
        ok = (
            isinstance(dims, list)
            and type(row.get("length")) is int
            and all(
                isinstance(d, list) and len(d) == 2 and all(type(x) is int for x in d)
                for d in dims[:64]
            )
        )
        if ok:
            out.append(
                {"symbol": str(row.get("symbol"))[:20], "length": row["length"], "dims": dims[:64]}
            )
    return out


def overflow(out, base_nonfinite: Callable[[], int], desc: dict | None = None) -> str | None:
    """Why a reference's outputs ``out`` on derived values are unusable (issue 29): NaN/Inf
    where the reference on the seed's own inputs has none (``base_nonfinite()``: its count,
    computed only when ``out`` has any); None when they are usable. A derived input ``desc``
    that plants NaN/Inf (:func:`.derived_values.plants_nonfinite`, issue 52) is usable with a
    non-finite reference: the baseline, then the candidate, must reproduce its NaN/Inf where
    they are (:func:`.compare.compare`)."""
    from .compare import nonfinite
    from .derived_values import plants_nonfinite

    if desc is not None and plants_nonfinite(desc):
        return None
    bad, total = nonfinite(out)
    if not bad or base_nonfinite():
        return None
    return f"the reference is not finite on it ({bad} of {total} output values NaN or Inf)"


def _where(desc: dict) -> str:
    return f"{derived_inputs.what(desc)} {derived_inputs.label(desc)}"


def _skip(desc: dict, why: str) -> dict:
    return {"name": str(desc.get("name")), "why": why[:_MAX_WHY]}


def _dead(failure: Failure) -> bool:
    """The evaluated code's process is gone or stuck: no further check can run."""
    result = failure.result
    return "candidate_status" in result or result.get("status") == "timeout"


def _run_case(ref, desc: dict, check: Callable, torch) -> None:
    """Make the case of ``desc`` (reference process) and check the evaluated code on it.
    Raises Unusable (no case) or Failure (the code failed on it)."""
    seed = int(desc.get("seed") or 1)
    seg, inputs, expected = ref.derived_case(seed, desc.get("shape"), desc, torch)
    try:
        check((seed, seg, inputs, expected), _where(desc))
    finally:
        ref.discard(seg)


def _baseline_on(ref, desc: dict, check: Callable, torch) -> tuple[str, bool] | None:
    """None when the evaluated code is correct on ``desc``; else ``(why, dead)``: why it is
    not used, and whether the evaluated code's process is gone (:func:`_dead`)."""
    try:
        _run_case(ref, desc, check, torch)
    except Unusable as exc:
        return str(exc), False
    except Failure as failure:
        status, message = failure.result.get("status"), failure.result.get("message") or ""
        what = "is wrong on it" if status == "incorrect" else f"fails on it ({status})"
        return f"the baseline {what}: {message}", _dead(failure)
    return None


def slot_seeds(seeds: list[int], count: int) -> list[int]:
    """The seed each of ``count`` slots is made from: the correctness seeds after the first,
    in turn (``[1, 2, 3, 4, 5]``, 6 slots: ``[2, 3, 4, 5, 2, 3]``), so that a candidate's
    checks of those seeds are the derived inputs (:func:`derived_seeds`); the first seed
    alone when there is only one."""
    rest = list(seeds[1:]) or list(seeds[:1]) or [1]
    return [rest[k % len(rest)] for k in range(count)]


def derived_seeds(listed, shape: dict | None) -> set[int]:
    """The seeds a candidate's derived inputs ``listed`` (the request's list) are made from,
    on ``shape``: its plain correctness check skips them, except the first seed (they are
    checked there as derived inputs: the "fewer seeds" of issue 29)."""
    if not isinstance(listed, list):
        return set()
    return {
        d["seed"]
        for d in listed
        if isinstance(d, dict) and type(d.get("seed")) is int and d.get("shape") == shape
    }


def find_usable(
    ref,
    check: Callable,
    torch,
    seeds: list[int],
    shape: dict | None,
    budget_s: float | None = None,
    time_s: float | None = None,
) -> dict:
    """Baseline mode (module docstring): the derived inputs planned from the first seed's
    inputs (of ``shape``, or None) checked on the evaluated code: slots of a shape and a value
    part (split into parts where it fails), then each layout alone (the first of each class
    first), then each usable layout merged into a used slot. At most
    :data:`.derived_inputs.MAX_CHECKED` are checked, none new past ``time_s`` seconds but the
    first max(4, seeds - 1) slots and a layout of each class; of the usable ones a candidate
    is checked on those whose cost fits ``budget_s`` (:meth:`_Finder.within`). The others are
    ``deferred`` with why, for the search (issue 52). Returns ``{"used", "skipped", "deferred",
    "space"}``. Never raises Failure: a harness error skips everything with its message; a
    crash or hang of the evaluated code skips the derived input it happened on and the ones
    after."""
    seed = seeds[0] if seeds else 1
    try:
        plan = ref.derived_plan(seed, shape)
    except (Failure, Unusable) as exc:
        why = exc.result.get("message") if isinstance(exc, Failure) else str(exc)
        return {"used": [], "skipped": [{"name": "all inputs", "why": f"not derived: {why}"}]}
    finder = _Finder(ref, check, torch, shape, list(plan["skipped"]))
    by_kind = {k: [p for p in plan["derived"] if derived_inputs.kind(p) == k] for k in _KINDS}
    slots = derived_inputs.combine(by_kind["shape"], by_kind["values"], [])
    layouts = _class_first(by_kind["layout"])
    limit = derived_inputs.MAX_CHECKED
    n_layouts = min(len(layouts), max(limit // 2, limit - len(slots)))
    slots, later = slots[: limit - n_layouts], slots[limit - n_layouts :]
    layouts, later = layouts[:n_layouts], later + layouts[n_layouts:]
    why = f"more than {limit} derived inputs for the baseline to check"
    deferred = [dict(d, why=why) for d in later]
    seeds_of = iter(slot_seeds(list(seeds) or [1], len(slots) + len(layouts)))
    floor = max(derived_inputs.MIN_USED, len(seeds) - 1)
    if time_s is not None:  # the baseline's checks take at most a share of its evaluation
        finder.until = time.monotonic() + time_s
    finder.run([dict(d, seed=next(seeds_of), shape=shape) for d in slots], floor)
    n_classes = len({derived_inputs.part_class(p) for p in layouts})  # each class once, always
    layouts = finder.run([dict(d, seed=next(seeds_of), shape=shape) for d in layouts], n_classes)
    finder.merge(layouts)
    deferred = finder.deferred + deferred
    used, over = finder.within(budget_s, floor)
    if over:
        spent = sum(finder.cost.get(id(d), 0.0) for d in used)
        why = (
            f"the derived checks' budget binds ({derived_inputs.BUDGET_SHARE:.0%} of an "
            f"evaluation and the seeds they replace: {budget_s:.2f} s, {spent:.2f} s used)"
        )
        deferred = [dict(d, why=why) for d in over] + deferred
    space = {"signature": plan["signature"], "symbols": plan["symbols"], "parts": plan["derived"],
             "seed": slot_seeds(list(seeds) or [1], 1)[0], "shape": shape}  # fmt: skip
    return {"used": used, "skipped": finder.skipped, "deferred": deferred, "space": space}


def _class_first(parts: list[dict]) -> list[dict]:
    """``parts`` with the first of each class (:func:`.derived_inputs.part_class`) first, in
    order, then the others: every class is checked by the baseline and, merged into the first
    slots, on every candidate, whatever the time and the budget leave for the rest."""
    seen: set[str] = set()
    first, rest = [], []
    for part in parts:
        name = derived_inputs.part_class(part)
        (rest if name in seen else first).append(part)
        seen.add(name)
    return first + rest


_KINDS = ("shape", "values", "layout")
_OUT_OF_TIME = (
    "the baseline's derived checks ran out of time (half the rest of its evaluation, "
    "derived_inputs.BASELINE_SHARE)"
)
_ENDED = "not checked: the baseline's process ended on an earlier derived input"


class _Finder:
    """The usable derived inputs of a baseline, found one checked call at a time; stops for
    good once the evaluated code's process is gone (:attr:`dead`)."""

    def __init__(self, ref, check: Callable, torch, shape, skipped: list[dict]) -> None:
        self.ref, self.check, self.torch, self.shape = ref, check, torch, shape
        self.used: list[dict] = []
        self.skipped = skipped
        self.dead = False
        self.cost: dict[int, float] = {}  # id(descriptor) -> s of its passing check
        self.until: float | None = None  # monotonic s: past it, no new derived input checked
        self.deferred: list[dict] = []  # not checked: the time ran out (:meth:`run`)

    def within(self, budget_s: float | None, floor: int = 1) -> tuple[list[dict], list[dict]]:
        """``(kept, over)``: :attr:`used` in order while their measured cost fits
        ``budget_s`` (the first ``floor`` always: the verdicts on them never depend on the
        machine's load), and the rest."""
        if budget_s is None:
            return list(self.used), []
        kept: list[dict] = []
        total = 0.0
        for k, desc in enumerate(self.used):
            total += derived_inputs.COST_FACTOR * self.cost.get(id(desc), 0.0)
            if len(kept) >= floor and total > budget_s:
                return kept, self.used[k:]
            kept.append(desc)
        return kept, []

    def _on(self, desc: dict) -> str | None:
        """None when the code is correct on ``desc``; else why not (and :attr:`dead` set when
        its process is gone)."""
        t0 = time.perf_counter()
        found = _baseline_on(self.ref, desc, self.check, self.torch)
        if found is None:
            self.cost[id(desc)] = time.perf_counter() - t0
            return None
        self.dead = found[1]
        return found[0]

    def run(self, todo: list[dict], floor: int = 0) -> list[dict]:
        """Check each of ``todo`` (a slot is split when it fails); add the usable ones to
        :attr:`used` and return them. Past :attr:`until`, the ones after the first ``floor``
        are not checked but :attr:`deferred`."""
        found: list[dict] = []
        for k, desc in enumerate(todo):
            if self.dead:
                self.skipped.extend(_skip(other, _ENDED) for other in todo[k:])
                break
            if k >= floor and self.until is not None and time.monotonic() > self.until:
                self.deferred += [dict(d, why=_OUT_OF_TIME) for d in todo[k:]]
                break
            why = self._on(desc)
            if why is None:
                found.append(desc)
            elif derived_inputs.kind(desc) == "combined" and not self.dead:
                found += self._split(desc)
            else:
                self.skipped.append(_skip(desc, why))
        self.used += found
        return found

    def _split(self, slot: dict) -> list[dict]:
        """A slot the code is not correct on, part by part: the usable parts, combined again
        into one slot when the code is correct on that too (one checked call for every
        candidate instead of one per part)."""
        extra = {"seed": slot.get("seed"), "shape": slot.get("shape")}
        good: list[dict] = []
        for part in slot["parts"]:
            if self.dead:
                self.skipped.append(_skip(part, _ENDED))
                continue
            alone = dict(part, **extra)
            why = self._on(alone)
            if why is None:
                good.append(alone)
            else:
                self.skipped.append(_skip(part, why))
        if len(good) > 1 and not self.dead:
            again = dict(derived_inputs.combined([_part(p) for p in good]), **extra)
            if self._on(again) is None:
                return [again]
        return good

    def merge(self, layouts: list[dict]) -> None:
        """Merge each usable layout into a used slot without one (the merged slot checked on
        the code first; where it is not correct there, or the process is gone, the layout and
        the slot stay apart, both usable as they were checked)."""
        for lay in layouts:
            target = next((d for d in self.used if not _has_layout(d)), None)
            if target is None or self.dead:
                return
            parts = [_part(p) for p in derived_inputs.parts(target)] + [_part(lay)]
            merged = dict(derived_inputs.combined(parts), seed=target["seed"], shape=self.shape)
            if self._on(merged) is None:
                self.used[self.used.index(target)] = merged
                self.used.remove(lay)


def _part(desc: dict) -> dict:
    """``desc`` without the ``seed`` and ``shape`` a slot carries for all its parts."""
    return {k: v for k, v in desc.items() if k not in ("seed", "shape")}


def _has_layout(desc: dict) -> bool:
    return any(derived_inputs.kind(p) == "layout" for p in derived_inputs.parts(desc))


def _named(failure: Failure, desc: dict) -> Failure:
    """``failure`` with its message naming the derived input: ``wrong on derived input ...:
    <compare's message>`` for ``incorrect``, ``<message> (on derived input ...)`` otherwise
    (``derived shape`` for a shape alone)."""
    result = dict(failure.result)
    if result.get("derived_input"):
        return failure  # named already, after a part (:func:`_which_part`)
    where = _where(desc)
    message = str(result.get("message") or "")
    if result.get("status") == "incorrect":
        body = message[len(where) + 2 :] if message.startswith(f"{where}: ") else message
        result["message"] = f"wrong on {where}: {body}"
        result["rule"] = f"{DERIVED_RULE} {str(desc.get('name'))[:160]}"
    elif where not in message:
        result["message"] = f"{message} (on {where})" if message else f"failed on {where}"
    result["derived_input"] = where  # a death's message is the supervisor's: it appends this
    return Failure(result)


def check_listed(ref, check: Callable, torch, listed: list, n_inputs: int | None = None) -> dict:
    """Candidate mode (module docstring): check the candidate on every descriptor of
    ``listed`` (the request's ``derived_inputs``); returns ``{"used", "skipped"}`` (skipped:
    malformed descriptors, derived inputs whose reference cannot run). Raises Failure naming
    the derived input when the candidate fails on one. ``n_inputs``: how many inputs the
    harness makes (bounds the descriptors' input indices; None: not checked here)."""
    used: list[dict] = []
    skipped: list[dict] = []
    for raw in listed:
        desc = derived_inputs.checked(raw, n_inputs if n_inputs is not None else 1 << 16)
        if desc is None:
            name = str(raw.get("name")) if isinstance(raw, dict) else str(raw)[:80]
            skipped.append({"name": name, "why": "malformed derived-input descriptor"})
            continue
        try:
            _run_case(ref, desc, check, torch)
        except Unusable as exc:
            skipped.append(_skip(desc, str(exc)))
            continue
        except Failure as failure:
            raise _named(_which_part(ref, desc, check, torch, failure), desc) from None
        used.append(desc)
    return {"used": used, "skipped": skipped}


def _which_part(ref, slot: dict, check: Callable, torch, failure: Failure) -> Failure:
    """The failure of the candidate on a slot, narrowed to the first of its parts it is also
    wrong on alone (``wrong on derived input x row-padded ...``, not the whole slot), so the
    message and the memory name the cause; ``failure`` itself when the slot is a single part,
    the candidate's process is gone, or no part fails alone. Costs the failing candidate at
    most one more call per part."""
    if derived_inputs.kind(slot) != "combined" or _dead(failure):
        return failure
    extra = {"seed": slot.get("seed"), "shape": slot.get("shape")}
    for part in slot["parts"]:
        desc = dict(part, **extra)
        try:
            _run_case(ref, desc, check, torch)
        except Unusable:
            continue
        except Failure as alone:
            return _named(alone, desc)
    return failure
