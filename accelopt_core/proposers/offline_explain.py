"""What the offline proposer sees in a kernel file, in words (issue 13).

:func:`explain` gives one line per launch parameter of a kernel's launches: what it is, where
its value comes from and why it is or is not tunable, e.g.::

    rms_norm: BLOCK_SIZE (launch of rms_norm_kernel, line 45) comes from
    calculate_settings(n_cols) (line 41; calculate_settings, imported from .utils): tunable
    by bounding it in rms_norm: max(..., FLOOR) only (the kernel has no loop: a smaller
    block could miss data)

:class:`accelopt_core.proposers.offline.OfflineProposer` puts these lines in its ``notes``
when a parent exposes nothing it can tune.
"""

from __future__ import annotations

import ast

from accelopt_core.kernelfile import KernelInfo, parse_kernel_file
from accelopt_core.proposers.offline_autotune import AutotuneSite, autotune_site
from accelopt_core.proposers.offline_tunables import (
    IGNORED_ON_CPU,
    find_tunables,
    kernel_loops,
    launcher_defs,
    timing_ignores_launch_params,
)
from accelopt_core.proposers.offline_values import ValueSource, launch_values

__all__ = ["explain"]


def explain(source: str, kernel_name: str, timing: str | None = None) -> list[str]:
    """One line per launch parameter of ``kernel_name``'s launches (launchers in source order,
    then the autotune configs and the constexpr parameters no launch passes): what it is,
    where its value comes from (with 1-based line numbers) and whether the offline proposer
    tunes it. ``timing`` is the ``EvalResult.timing`` of the search (``interpreter`` /
    ``simulated``: ``num_warps`` / ``num_stages`` are said not tuned). One line saying why
    when the source does not parse, the kernel is missing or nothing launches it. Never
    raises."""
    try:
        return _explain(source, kernel_name, timing)
    except (SyntaxError, ValueError, RecursionError) as exc:
        return [f"{kernel_name}: the source could not be analysed ({exc})"]


def _explain(source: str, kernel_name: str, timing: str | None) -> list[str]:
    kf = parse_kernel_file(source)
    if not kf.ok:
        return [f"{kernel_name}: the source does not parse"]
    if kernel_name not in kf.kernel_names:
        return [f"{kernel_name}: no kernel of that name in the file"]
    kernel = kf.kernel(kernel_name)
    if kernel.backend == "nki":
        return _explain_nki(source, kernel_name)
    tree = ast.parse(source)
    launchers = {la.name for la in kf.launchers if kernel_name in la.kernels}
    cpu = timing_ignores_launch_params(timing)
    loops = kernel_loops(tree, kernel_name)
    lines: list[str] = []
    passed: set[str] = set()
    for fn in launcher_defs(tree, launchers):
        for call in _launches_of(fn, kernel_name):
            for vs in launch_values(tree, fn, call, kernel):
                passed.add(vs.param)
                lines.append(_value_line(vs, kernel, loops, timing if cpu else None))
    site = autotune_site(tree, kernel_name)
    if site is not None:
        lines += _autotune_lines(site, timing if cpu else None)
        passed |= set(site.keys)
    for name in kernel.constexpr_params:
        if name not in passed:
            lines.append(
                f"{kernel_name}: {name} is not passed by any launch (a default or "
                "@triton.heuristics value): not tuned"
            )
    if not launchers:
        lines.insert(0, f"{kernel_name}: no module-level function launches it "
                        "(kernel[grid](...)): no launch parameters to tune")  # fmt: skip
    elif not lines:
        lines.append(f"{kernel_name}: its launches pass no constexpr, num_warps or num_stages")
    return lines


def _launches_of(fn: ast.AST, kernel_name: str) -> list[ast.Call]:
    calls = [
        n
        for n in ast.walk(fn)
        if isinstance(n, ast.Call)
        and isinstance(n.func, ast.Subscript)
        and isinstance(n.func.value, ast.Name)
        and n.func.value.id == kernel_name
    ]
    return sorted(calls, key=lambda n: (n.lineno, n.col_offset))


def _origin(vs: ValueSource) -> str:
    """Where the value comes from, in words."""
    if vs.how == "literal":
        return f"= {vs.literal.value} (a literal in the launch)"  # type: ignore[union-attr]
    if vs.how == "local":
        return f"= {vs.literal.value} (local {vs.local}, line {vs.def_line})"  # type: ignore[union-attr]
    if vs.how == "module":
        return f"= {vs.literal.value} (module constant {vs.local}, line {vs.def_line})"  # type: ignore[union-attr]
    if vs.how == "computed":
        helper = f"; {vs.helper}" if ", " in vs.helper else ""
        bounds = "".join(
            f", {'min' if b == 'cap' else 'max'}(..., {lit.value})" for b, lit in vs.bounds.items()
        )
        return f"comes from {vs.core} (line {vs.def_line}{helper}){bounds}"
    if not vs.local:
        return f"is {vs.note}"
    return f"comes from {vs.local}: {vs.note}"


def _verdict(vs: ValueSource, kind_ok: bool, loops: bool, cpu_timing: str | None) -> str:
    """Whether (and how) the offline proposer tunes the value, and why not."""
    if not kind_ok:
        return "not tuned (not a block/tile size, num_warps or num_stages)"
    if cpu_timing and vs.param in IGNORED_ON_CPU:
        return f"not tuned under {cpu_timing} timing (it ignores {vs.param})"
    if vs.how in ("literal", "local", "module"):
        return "tunable (the literal is rewritten)"
    if vs.how != "computed":
        return "not tunable"
    if vs.site is None and vs.insert_after is None:
        return "not tunable (no place to bound it)"
    if vs.param not in IGNORED_ON_CPU and not loops:
        return (
            f"tunable by bounding it in {vs.launcher}: max(..., FLOOR) only (the kernel has "
            "no loop: a smaller block could miss data)"
        )
    return f"tunable by bounding it in {vs.launcher}: min(..., CAP) / max(..., FLOOR)"


def _value_line(vs: ValueSource, kernel: KernelInfo, loops: bool, cpu_timing: str | None) -> str:
    upper = vs.param.upper()
    kind_ok = vs.param in ("num_warps", "num_stages") or (
        vs.param in kernel.constexpr_params and ("BLOCK" in upper or "TILE" in upper)
    )
    where = f"{vs.launcher}: {vs.param} (launch of {vs.kernel}, line {vs.line})"
    return f"{where} {_origin(vs)}: {_verdict(vs, kind_ok, loops, cpu_timing)}"


def _autotune_lines(site: AutotuneSite, cpu_timing: str | None) -> list[str]:
    """One line per config key of the autotune decorator."""
    if site.why_not:
        return [
            f"{site.kernel}: its launch parameters come from the autotune configs (line "
            f"{site.line}): not tunable, {site.why_not}"
        ]
    out = []
    first = site.configs[0].describe()
    for key in site.keys:
        head = f"{site.kernel}: {key} comes from the autotune configs (line {site.line})"
        if cpu_timing and key in IGNORED_ON_CPU:
            out.append(f"{head}: not tuned under {cpu_timing} timing (it ignores {key})")
        elif cpu_timing:
            out.append(
                f"{head}: tunable by editing the config list; under {cpu_timing} timing the "
                f"first config ({first}) is the one timed"
            )
        else:
            out.append(f"{head}: tunable by editing the config list (add / drop / pin)")
    return out


def _explain_nki(source: str, kernel_name: str) -> list[str]:
    params = find_tunables(source, kernel_name)
    if not params:
        return [
            f"{kernel_name}: NKI kernel with no tile constant (a TILE/BLOCK name bound once to "
            "an integer, at module level or in its launcher): nothing to tune"
        ]
    return [
        f"{p.launcher}: {p.name} = {p.value} (line {p.range.start_line}): tunable (NKI tile, "
        "the literal is rewritten)"
        for p in params
    ]
