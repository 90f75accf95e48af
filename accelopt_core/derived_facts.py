"""The derived inputs a result was checked on, in the words users read (issues 22, 29 and 52).

``metrics["derived_inputs"]`` (``derived_shapes`` on results before issue 29) carries the
``used`` and ``skipped`` shapes, values and layouts derived from the harness's inputs, each a
correctness check, never timed; since issue 52 also ``deferred`` (left by a budget to the
property-based search) and, on a candidate's result, ``search`` (its seed, examples tried,
budget and counterexample). ``metrics["shapes"]`` lists the timed and held-out shapes of
``BENCH["shapes"]``.

Everything here reads those dicts defensively (a missing or mistyped key is left out, never an
exception) and returns plain text or plain data. :mod:`accelopt_core.devicefacts` re-exports
every public name, so the CLI, the search report, the language server, the planner's prompt and
the optimization memory keep calling ``devicefacts.derived_summary`` and friends.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = [
    "classes_text",
    "deferred_lines",
    "derived_classes",
    "derived_deferred",
    "derived_detail_lines",
    "derived_facts",
    "derived_rows",
    "derived_search",
    "derived_summary",
    "grouped_reasons",
    "number",
    "search_line",
    "search_lines",
]


def number(value: Any) -> float | None:
    """``value`` as a float when it is an int or float (not a bool), else None: metrics come
    from the target and are read defensively."""
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def _derived(metrics: Mapping[str, Any] | None) -> Mapping[str, Any] | None:
    """``metrics["derived_inputs"]`` (``derived_shapes`` of results before issue 29)."""
    m = metrics or {}
    for key in ("derived_inputs", "derived_shapes"):
        if isinstance(m.get(key), Mapping):
            return m[key]
    return None


def _derived_records(derived: Mapping[str, Any] | None, key: str) -> list[Mapping[str, Any]]:
    found = (derived or {}).get(key)
    return [r for r in found if isinstance(r, Mapping)] if isinstance(found, list) else []


def derived_classes(metrics: Mapping[str, Any] | None) -> dict[str, int]:
    """How many derived parts of each class the result was checked on, in first-seen order:
    ``{"shape": 4, "values: large": 2, "layout: permuted": 1}``, the classes of
    :func:`accelopt_core.onsite.judge.derived_inputs.part_class` (a slot counts each of its
    parts); ``{}`` without ``metrics["derived_inputs"]``."""
    from accelopt_core.onsite.judge.derived_inputs import part_class

    counts: dict[str, int] = {}
    for desc in _derived_records(_derived(metrics), "used"):
        found = desc.get("parts") if desc.get("kind") == "combined" else [desc]
        for part in found if isinstance(found, list) else []:
            if not isinstance(part, Mapping):
                continue
            try:
                name = part_class(dict(part))
            except (KeyError, TypeError, ValueError, AttributeError):  # a result's odd part
                name = str(part.get("kind") or "shape")
            counts[name] = counts.get(name, 0) + 1
    return counts


def _kind_word(kind: str, n: int) -> str:
    """``shape`` → ``4 shapes``; a kind already plural (``values``) stays as it is."""
    plural = kind if kind.endswith("s") else kind + "s"
    return f"{n} {kind if n == 1 else plural}"


def classes_text(counts: Mapping[str, int]) -> str:
    """Class counts (:func:`derived_classes`) in words, grouped by kind (the text before
    ``": "`` of a class) in first-seen order: ``4 shapes; values: 6 (large 2, sign-flipped
    scale 1, ...); layouts: 4 (permuted 2, sliced 2)``. A kind without sub-classes is counted
    alone (``4 shapes``); every class is named, however many (nothing is cut); ``""`` when
    ``counts`` is empty."""
    kinds: dict[str, dict[str, int]] = {}
    for name, n in counts.items():
        kind, _, sub = str(name).partition(": ")
        group = kinds.setdefault(kind, {})
        group[sub] = group.get(sub, 0) + int(n)
    out = []
    for kind, subs in kinds.items():
        total = sum(subs.values())
        named = [f"{sub} {n}" for sub, n in subs.items() if sub]
        if not named:
            out.append(_kind_word(kind, total))
            continue
        if subs.get(""):
            named.append(f"other {subs['']}")
        plural = kind if kind.endswith("s") else kind + "s"
        out.append(f"{plural}: {total} ({', '.join(named)})")
    return "; ".join(out)


def derived_summary(metrics: Mapping[str, Any] | None) -> str | None:
    """How far a correctness claim reaches (issues 22, 29 and 52), counted by class
    (:func:`classes_text`): ``timed on 1 shape, checked on 14 derived inputs: 4 shapes; values:
    6 (large 2, ...); layouts: 4 (permuted 2, sliced 2)``; with ``BENCH["shapes"]``
    (``metrics["shapes"]``) ``timed on 2 shapes, checked on 1 held-out shape and 14 derived
    inputs: ...``; then the derivations skipped and those a budget left to the property-based
    search, counted: `` · 2 skipped · 3 left to the search``. None when the result carries
    neither. The same words on every surface (CLI, report, lens, hover, planner's prompt)."""
    m = metrics or {}
    rows = m.get("shapes") if isinstance(m.get("shapes"), list) else []
    rows = [r for r in rows if isinstance(r, Mapping)]
    derived = _derived(m)
    if not rows and derived is None:
        return None
    timed = sum(1 for r in rows if r.get("timed")) if rows else 1
    held = sum(1 for r in rows if not r.get("timed"))
    checks = [_plural(held, "held-out shape")] if held else []
    tail = ""
    if derived is not None:
        counts = derived_classes(m)
        kinds = classes_text(counts)
        checks.append(
            _plural(sum(counts.values()), "derived input") + (f": {kinds}" if kinds else "")
        )
        skipped = len(_derived_records(derived, "skipped"))
        deferred = len(_derived_records(derived, "deferred"))
        tail += f" · {skipped} skipped" if skipped else ""
        tail += f" · {deferred} left to the search" if deferred else ""
    text = f"timed on {_plural(timed, 'shape')}"
    if checks:
        text += ", checked on " + " and ".join(checks)
    return text + tail


def derived_rows(
    metrics: Mapping[str, Any] | None,
) -> tuple[list[tuple[str, str | None]], list[tuple[str, str]]]:
    """The derived inputs of ``metrics["derived_inputs"]``: ``([(name, inputs or None), ...]``
    checked (one per checked call: a slot names all its parts), ``[(name, why), ...]``
    skipped), read defensively; both empty without them."""
    derived = _derived(metrics)
    used = [
        (str(r.get("name", "?")), str(r["inputs"]) if r.get("inputs") else None)
        for r in _derived_records(derived, "used")
    ]
    return used, _reasons(derived, "skipped")


def _reasons(derived: Mapping[str, Any] | None, key: str) -> list[tuple[str, str]]:
    return [
        (str(r.get("name", "?")), str(r.get("why") or "no reason given"))
        for r in _derived_records(derived, key)
    ]


def derived_deferred(metrics: Mapping[str, Any] | None) -> list[tuple[str, str]]:
    """``[(name, why), ...]``: the derivations a budget left out of every candidate's checks
    and left to the property-based search (``metrics["derived_inputs"]["deferred"]``, issue
    52); ``[]`` for results without them (judges before issue 52)."""
    return _reasons(_derived(metrics), "deferred")


def grouped_reasons(rows: list[tuple[str, str]]) -> list[tuple[list[str], str]]:
    """``(name, why)`` rows with the same reason joined, in first-seen order: ``[(["x × -250
    (sign-flipped scale)", "x permuted (1, 0)"], "not checked on every candidate: ...")]``, so a
    reason a budget gives forty derivations reads once."""
    out: dict[str, list[str]] = {}
    for name, why in rows:
        out.setdefault(why, []).append(name)
    return [(names, why) for why, names in out.items()]


def derived_search(metrics: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """The property-based search's facts on a candidate's result
    (``metrics["derived_inputs"]["search"]``, issue 52,
    :class:`accelopt_core.evaluation.counterexample.SearchOutcome`), read defensively:
    ``{"seed", "tried" (examples drawn), "usable" (of those, the ones the baseline is correct
    on), "calls" (checked calls made), "budget" (most checked calls allowed): int or None,
    "seconds": float or None, "counterexample": str or None, "examples": [str, ...] (names of
    the first examples drawn), "skipped": str or None (why no search ran)}``; None when the
    search did not run on it (a baseline, a result from an older judge)."""
    search = (_derived(metrics) or {}).get("search")
    if not isinstance(search, Mapping):
        return None

    def whole(key: str) -> int | None:
        n = number(search.get(key))
        return int(n) if n is not None else None

    def text(key: str) -> str | None:
        value = search.get(key)
        return str(value) if value not in (None, "") else None

    examples = search.get("examples") if isinstance(search.get("examples"), list) else []
    return {
        **{key: whole(key) for key in ("seed", "tried", "usable", "calls", "budget")},
        "seconds": number(search.get("seconds")),
        "counterexample": text("counterexample"),
        "examples": [str(e) for e in examples if e not in (None, "")],
        "skipped": text("skipped"),
    }


def search_line(metrics: Mapping[str, Any] | None) -> str | None:
    """The search's counts in one line: ``search (seed 1234): 37 examples tried, 35 usable, 12
    of 40 checked calls; no disagreement with the baseline (2.1 s)``, ``...; found a
    disagreement (0.8 s)`` (the input itself is in :func:`search_lines`) or ``search (seed
    1234): not run: <why>``; None without a search."""
    search = derived_search(metrics)
    if search is None:
        return None
    head = "search" + (f" (seed {search['seed']})" if search["seed"] is not None else "")
    if search["skipped"] and not search["tried"]:
        return f"{head}: not run: {search['skipped']}"
    counts = []
    if search["tried"] is not None:
        counts.append(_plural(search["tried"], "example") + " tried")
    if search["usable"] is not None:
        counts.append(f"{search['usable']} usable")
    calls, budget = search["calls"], search["budget"]
    if calls is not None and budget is not None:
        counts.append(f"{calls} of {_plural(budget, 'checked call')}")
    elif budget is not None:
        counts.append(f"a budget of {_plural(budget, 'checked call')}")
    elif calls is not None:
        counts.append(_plural(calls, "checked call"))
    found = search["counterexample"]
    verdict = "found a disagreement" if found else "no disagreement with the baseline"
    if search["seconds"] is not None:
        verdict += f" ({search['seconds']:.1f} s)"
    return f"{head}: " + (", ".join(counts) + "; " if counts else "") + verdict


def search_lines(metrics: Mapping[str, Any] | None) -> list[str]:
    """:func:`search_line`, then ``counterexample: x 3×5 = [[...]]: max abs error ...`` and
    ``examples tried: a · b · c`` (every name); ``[]`` without a search."""
    line = search_line(metrics)
    search = derived_search(metrics)
    if line is None or search is None:
        return []
    lines = [line]
    if search["counterexample"]:
        lines.append(f"counterexample: {search['counterexample']}")
    if search["examples"]:
        lines.append("examples tried: " + " · ".join(search["examples"]))
    return lines


def derived_detail_lines(metrics: Mapping[str, Any] | None) -> list[str]:
    """The derived inputs one by one: ``checked: x[1] 64→63, x + 512 (offset) (x: 16×63)``,
    ``skipped: x column-major: the baseline is wrong on it: ...``, ``left to the search (not
    checked on every candidate: ...): x × -250 · x permuted (1, 0)`` (derivations with the
    same reason on one line, :func:`deferred_lines`), then :func:`search_lines`; ``[]``
    without ``metrics["derived_inputs"]``."""
    used, skipped = derived_rows(metrics)
    lines = [f"checked: {name}" + (f" ({inputs})" if inputs else "") for name, inputs in used]
    lines += [f"skipped: {name}: {why}" for name, why in skipped]
    return lines + deferred_lines(metrics) + search_lines(metrics)


def deferred_lines(metrics: Mapping[str, Any] | None) -> list[str]:
    """``left to the search (not checked on every candidate: ...): x × -250 (sign-flipped
    scale) · x permuted (1, 0)``, one line per reason (:func:`grouped_reasons`), the reason
    first and every name whole (names hold commas, so `` · `` parts them); ``[]`` when nothing
    was left to the search."""
    return [
        f"left to the search ({why}): {' · '.join(names)}"
        for names, why in grouped_reasons(derived_deferred(metrics))
    ]


def derived_facts(metrics: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """The derived inputs as data, for ``accelopt profile --json`` and the search report:
    ``{"summary": str, "classes": {class: n}, "checked": [[name, inputs or ""], ...],
    "skipped": [[name, why], ...], "deferred": [[name, why], ...], "deferred_groups":
    [[[name, ...], why], ...] (:func:`grouped_reasons`), "search": dict or None
    (:func:`derived_search`), "search_line": str or None}``; None when the result carries no
    derived inputs and no shapes."""
    summary = derived_summary(metrics)
    used, skipped = derived_rows(metrics)
    deferred = derived_deferred(metrics)
    if summary is None and not used and not skipped and not deferred:
        return None
    return {
        "summary": summary,
        "classes": derived_classes(metrics),
        "checked": [[name, inputs or ""] for name, inputs in used],
        "skipped": [[name, why] for name, why in skipped],
        "deferred": [[name, why] for name, why in deferred],
        "deferred_groups": [[names, why] for names, why in grouped_reasons(deferred)],
        "search": derived_search(metrics),
        "search_line": search_line(metrics),
    }
