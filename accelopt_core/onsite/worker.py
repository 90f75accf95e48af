"""AccelOpt evaluation worker: the self-contained program that runs ON the target.

Standard library only at import time. Torch and Triton (or NumPy and the Neuron SDK) are
imported lazily, inside the forked evaluation process. The file is shipped as source to bare
machines (see :mod:`accelopt_core.targets.shipping`), so it never imports this project and
never relies on ``__file__``.

Wire format
-----------
stdin: one JSON object, ``accelopt_core.onsite.protocol.EvalRequest.to_dict()`` (or ``{"probe": true}``
to ask for the device names and software versions).
stdout: exactly one line ``@@ACCELOPT_RESULT@@ {json}`` (the last line), whose JSON holds the
fields of ``accelopt_core.onsite.protocol.EvalResult``. Anything else on stdout is noise; use
:func:`parse_result_line` to find the result.

Process model (DESIGN.md, "Evaluating a candidate")
---------------------------------------------------
The supervisor (the process that read the request) imports nothing heavy and forks one child per
request. The child starts a new session, pins the device (``CUDA_VISIBLE_DEVICES`` /
``NEURON_RT_VISIBLE_CORES``), imports torch and triton (with ``TRITON_INTERPRET=1`` when there is
no CUDA), limits its memory (``RLIMIT_AS`` on CPU, plus an RSS watchdog thread), loads the
original file and the candidate from strings (no temporary files: the sources are registered in
:mod:`linecache` under ``<harness:NAME>`` / ``<candidate:NAME>`` so ``inspect.getsource`` works
for ``triton.jit``), checks correctness on every seed and times the entry. The child's fd 1 and
2 go to pipes (stdout output becomes a warning, stderr a tail for crash messages); its result
goes to a third pipe. The supervisor enforces the timeout by killing the child's process group
and classifies a child that died without a result (signal or exit code).
"""

from __future__ import annotations

import ast
import functools
import json
import os
import re
import signal
import sys
import time

from .protocol import HARNESS_VERSION, SENTINEL, signal_name, tail

#: Default (rtol, atol) by output dtype when BENCH gives none.
DEFAULT_TOLERANCES = {
    "float64": (1e-7, 1e-7),
    "float32": (1e-4, 1e-4),
    "float16": (1e-2, 1e-2),
    "bfloat16": (2e-2, 2e-2),
}
_FLOAT8_TOLERANCE = (1e-1, 1e-1)

_TAIL_BYTES = 4000
_WATCHDOG_PERIOD_S = 0.05
_INTERP_MAX_RUNS = 20
_INTERP_MIN_RUNS = 3

# ----------------------------------------------------------------------------------------------
# Static gate (AST only; also used by accelopt_core.evaluation before a request is sent)
# ----------------------------------------------------------------------------------------------

#: torch functions a launcher may call: allocation, metadata, device queries.
_TORCH_ALLOWED = {
    "torch.empty",
    "torch.empty_like",
    "torch.empty_strided",
    "torch.zeros",
    "torch.zeros_like",
    "torch.ones",
    "torch.ones_like",
    "torch.full",
    "torch.full_like",
    "torch.device",
    "torch.Size",
    "torch.finfo",
    "torch.iinfo",
    "torch.is_tensor",
    "torch.get_default_dtype",
    "torch.is_floating_point",
}
_TORCH_CUDA_ALLOWED = {
    "torch.cuda.current_device",
    "torch.cuda.device_count",
    "torch.cuda.get_device_properties",
    "torch.cuda.get_device_name",
    "torch.cuda.get_device_capability",
    "torch.cuda.is_available",
    "torch.cuda.device",
}
#: Tensor / ndarray methods that compute (a launcher may only allocate, view and query).
_COMPUTE_METHODS = set(
    """abs absolute add add_ addcdiv addcmul addmm all amax amin any argmax argmin argsort
    baddbmm bfloat16 bmm ceil clamp clamp_ clip clone copy_ cos cosh cross cumprod cumsum
    diff div div_ dot double einsum eq erf exp exp2 exp_ expm1 flip float floor fmod gather ge
    gelu gt half index_add index_copy index_select kron le lerp log log10 log1p log2
    log_softmax logsumexp lt masked_fill masked_fill_ masked_scatter matmul max maximum mean
    median min minimum mm mul mul_ mv nan_to_num ne neg norm outer pow prod reciprocal relu
    remainder roll round rsqrt scatter scatter_ scatter_add sigmoid sign silu sin sinh softmax
    sort sqrt square std sub sub_ sum tan tanh to topk tril triu true_divide type var where
    """.split()
)
_NUMPY_COMPUTE = _COMPUTE_METHODS | {"add", "multiply", "divide", "subtract", "tensordot"}
_CONCURRENCY_MODULES = (
    "threading",
    "_thread",
    "multiprocessing",
    "concurrent",
    "subprocess",
    "asyncio",
    "torch.multiprocessing",
)
_FORBIDDEN_CALLS = re.compile(
    r"^(os\.(system|popen|fork|forkpty|spawn\w*|exec\w*|posix_spawn\w*)"
    r"|torch\.cuda\.(Stream|stream|set_stream|graph|CUDAGraph|graphs)|torch\.Stream"
    r"|functools\.(lru_cache|cache)|contextlib\.suppress)$"
)
_LOW_PRECISION = re.compile(r"^(float16|bfloat16|half|fp16|bf16|float8\w*|fp8\w*)$", re.I)


def _dotted(node: ast.AST) -> str | None:
    """``a.b.c`` for a Name/Attribute chain, else None."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = _dotted(node.value)
        return f"{base}.{node.attr}" if base else None
    return None


def _aliases(tree: ast.AST) -> dict[str, str]:
    """Local name -> full dotted module/object name, from every import in the module."""
    out: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.asname:
                    out[a.asname] = a.name
                else:
                    out[a.name.split(".")[0]] = a.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            for a in node.names:
                out[a.asname or a.name] = f"{node.module}.{a.name}"
    return out


def _resolve(node: ast.AST, aliases: dict[str, str]) -> str | None:
    name = _dotted(node)
    if name is None:
        return None
    head, _, rest = name.partition(".")
    if head in aliases:
        return aliases[head] + ("." + rest if rest else "")
    return name


def _jit_kernels(tree: ast.Module, aliases: dict[str, str]) -> dict[str, str]:
    """Top-level functions decorated with ``triton.jit`` / ``nki.jit`` -> "triton" | "nki"."""
    kernels: dict[str, str] = {}
    for node in tree.body:
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        for dec in node.decorator_list:
            target = dec.func if isinstance(dec, ast.Call) else dec
            name = _resolve(target, aliases) or ""
            if name == "jit" or name.endswith(".jit"):
                kernels[node.name] = "nki" if "nki" in name else "triton"
    return kernels


def _functions(tree: ast.Module) -> dict[str, ast.FunctionDef]:
    return {n.name: n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}


def _launcher_closure(tree: ast.Module, entry: str, kernels: dict[str, str]) -> list[ast.AST]:
    """The entry and every non-kernel top-level function it calls, transitively."""
    funcs = _functions(tree)
    seen: list[str] = []
    todo = [entry]
    while todo:
        name = todo.pop()
        if name in seen or name not in funcs or name in kernels:
            continue
        seen.append(name)
        for node in ast.walk(funcs[name]):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
                todo.append(node.func.id)
    return [funcs[n] for n in seen]


def _launches(fn: ast.AST, kernels: dict[str, str]) -> bool:
    for node in ast.walk(fn):
        if not isinstance(node, ast.Call):
            continue
        f = node.func
        if isinstance(f, ast.Subscript) and isinstance(f.value, ast.Name):
            if f.value.id in kernels:  # kernel[grid](...)
                return True
        if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name):
            if f.value.id in kernels and f.attr in ("run", "warmup"):
                return True
        if isinstance(f, ast.Name) and kernels.get(f.id) == "nki":  # nki kernel(...)
            return True
        for arg in node.args:  # nki.baremetal(kernel)(...), nki.simulate_kernel(kernel, ...)
            if isinstance(arg, ast.Name) and kernels.get(arg.id) == "nki":
                return True
    return False


def _tensor_params(fn: ast.AST, kernels: dict[str, str]) -> set[str]:
    """Parameters of a launcher that are used as tensors (passed to a kernel, .shape, ...)."""
    if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return set()
    params = {a.arg for a in fn.args.args + fn.args.kwonlyargs + fn.args.posonlyargs}
    tensors: set[str] = set()
    tensor_attrs = {"shape", "stride", "numel", "dtype", "device", "data_ptr", "element_size"}
    for node in ast.walk(fn):
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id in params
            and node.attr in tensor_attrs
        ):
            tensors.add(node.value.id)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Subscript):
            for arg in node.args:
                if isinstance(arg, ast.Name) and arg.id in params:
                    tensors.add(arg.id)
    return tensors


def _launcher_ops(
    tree: ast.Module, entry: str, kernels: dict[str, str], aliases: dict[str, str]
) -> list[tuple[str, int]]:
    """Compute operations in the launcher: ``(description, line)`` in source order."""
    ops: list[tuple[str, int]] = []
    for fn in _launcher_closure(tree, entry, kernels):
        tensors = _tensor_params(fn, kernels)
        for node in ast.walk(fn):
            if isinstance(node, ast.Call):
                name = _resolve(node.func, aliases)
                head = name.split(".")[0] if name else None
                if name and head == "torch":
                    if name.startswith("torch.cuda."):
                        if name not in _TORCH_CUDA_ALLOWED:
                            ops.append((name, node.lineno))
                    elif name not in _TORCH_ALLOWED:
                        ops.append((name, node.lineno))
                elif name and head == "numpy":
                    if name.rsplit(".", 1)[-1] in _NUMPY_COMPUTE:
                        ops.append((name, node.lineno))
                elif (
                    isinstance(node.func, ast.Attribute)
                    and node.func.attr in _COMPUTE_METHODS
                    and not (head and head in aliases)
                ):
                    ops.append((f".{node.func.attr}()", node.lineno))
            elif isinstance(node, (ast.BinOp, ast.AugAssign)):
                if isinstance(node.op, ast.MatMult):
                    ops.append(("@ (matmul)", node.lineno))
                elif isinstance(node, ast.BinOp):
                    for side in (node.left, node.right):
                        if isinstance(side, ast.Name) and side.id in tensors:
                            ops.append((f"arithmetic on tensor '{side.id}'", node.lineno))
            elif isinstance(node, ast.UnaryOp) and isinstance(node.operand, ast.Name):
                if node.operand.id in tensors and isinstance(node.op, ast.USub):
                    ops.append((f"arithmetic on tensor '{node.operand.id}'", node.lineno))
    ops.sort(key=lambda o: o[1])
    return ops


def _precision_tokens(tree: ast.AST) -> list[tuple[str, int]]:
    found: list[tuple[str, int]] = []
    for node in ast.walk(tree):
        token = None
        if isinstance(node, ast.Name):
            token = node.id
        elif isinstance(node, ast.Attribute):
            token = node.attr
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            token = node.value
        if token and _LOW_PRECISION.match(token):
            found.append((token.lower(), getattr(node, "lineno", 0)))
    found.sort(key=lambda t: t[1])
    return found


@functools.lru_cache(maxsize=64)
def _baseline_allowances(
    baseline_source: str | None, entry: str
) -> tuple[frozenset[str], frozenset[str]]:
    """What the baseline already does: its launcher's compute ops and its low-precision tokens.
    Cached: every candidate of a search is gated against the same baseline."""
    if not baseline_source:
        return frozenset(), frozenset()
    try:
        base_tree = ast.parse(baseline_source)
    except SyntaxError:
        return frozenset(), frozenset()
    base_aliases = _aliases(base_tree)
    base_kernels = _jit_kernels(base_tree, base_aliases)
    ops = frozenset(d for d, _ in _launcher_ops(base_tree, entry, base_kernels, base_aliases))
    tokens = frozenset(t for t, _ in _precision_tokens(base_tree))
    return ops, tokens


def static_gate(
    candidate_source: str,
    entry: str,
    baseline_source: str | None = None,
    tree: ast.Module | None = None,
) -> tuple[bool, str, int | None]:
    """Check a candidate's AST against the evaluation rules (DESIGN.md, rule 2).

    Args:
        candidate_source: the full candidate module.
        entry: name of the launcher (``BENCH["entry"].__name__``).
        baseline_source: the baseline module; compute ops in the launcher and low-precision
            dtypes the baseline already has are allowed. None: nothing is allowed.
        tree: the candidate already parsed (saves a parse), else it is parsed here.

    Returns:
        ``(ok, message, line)``: ok True with message "" when the candidate passes; else the
        reason and the 1-based candidate line. A candidate that does not parse fails with
        "syntax error" (call :func:`precheck` to get a compile_error for it instead).

    Rules: the entry must launch a ``@triton.jit`` (``kernel[grid](...)``) or ``@nki.jit``
    kernel defined in the candidate; no torch compute (only allocation, views and metadata) in
    the launcher and the functions it calls; no try/except or ``contextlib.suppress`` in kernels
    or launcher; no threads, processes, streams, CUDA graphs or result caches
    (``global`` / ``functools.cache``); no float16/bfloat16/float8 token the baseline lacks.
    """
    if tree is None:
        try:
            tree = ast.parse(candidate_source)
        except SyntaxError as exc:
            return False, f"syntax error: {exc.msg}", exc.lineno
    aliases = _aliases(tree)
    kernels = _jit_kernels(tree, aliases)
    funcs = _functions(tree)
    if entry not in funcs:
        return False, f"the candidate does not define the entry function '{entry}'", None
    if not kernels:
        return False, "the candidate defines no @triton.jit or @nki.jit kernel", None

    # Threads, processes, streams, graphs, caches: anywhere in the candidate.
    for node in ast.walk(tree):
        mods: list[str] = []
        if isinstance(node, ast.Import):
            mods = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            mods = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
        for mod in mods:
            if any(mod == m or mod.startswith(m + ".") for m in _CONCURRENCY_MODULES):
                return False, f"'{mod}' is not allowed (no threads or processes)", node.lineno
            if _FORBIDDEN_CALLS.match(mod):
                return False, f"'{mod}' is not allowed", node.lineno
        if isinstance(node, (ast.Attribute, ast.Name)):
            name = _resolve(node, aliases)
            if name and _FORBIDDEN_CALLS.match(name):
                return (
                    False,
                    f"'{name}' is not allowed (no streams, graphs, caches or shells)",
                    (node.lineno),
                )

    launcher = _launcher_closure(tree, entry, kernels)
    scope = launcher + [funcs[k] for k in kernels]
    for fn in scope:
        for node in ast.walk(fn):
            if isinstance(node, ast.Try) or type(node).__name__ == "TryStar":
                return (
                    False,
                    "try/except is not allowed in kernels or the launcher (no fallbacks)",
                    node.lineno,
                )
            if isinstance(node, (ast.Global, ast.Nonlocal)) and fn in launcher:
                return False, "global/nonlocal state in the launcher is not allowed", node.lineno
    module_names = {
        t.id
        for n in tree.body
        if isinstance(n, (ast.Assign, ast.AnnAssign))
        for t in (n.targets if isinstance(n, ast.Assign) else [n.target])
        if isinstance(t, ast.Name)
    }
    for fn in launcher:
        for node in ast.walk(fn):
            if (
                isinstance(node, ast.Subscript)
                and isinstance(node.ctx, ast.Store)
                and isinstance(node.value, ast.Name)
                and node.value.id in module_names
            ):
                return (
                    False,
                    f"the launcher writes into module-level '{node.value.id}' (no result caches)",
                    node.lineno,
                )

    if entry not in kernels and not any(_launches(fn, kernels) for fn in launcher):
        return (
            False,
            f"the entry '{entry}' does not launch a @triton.jit / @nki.jit kernel of the "
            "candidate (expected kernel[grid](...))",
            funcs[entry].lineno,
        )

    base_ops, base_tokens = _baseline_allowances(baseline_source, entry)
    for desc, line in _launcher_ops(tree, entry, kernels, aliases):
        if desc not in base_ops:
            return (
                False,
                f"compute outside the kernel: {desc} in the launcher (only allocation, views "
                "and metadata are allowed)",
                line,
            )

    for token, line in _precision_tokens(tree):
        if token not in base_tokens:
            return (
                False,
                f"precision downcast: '{token}' does not appear in the baseline",
                line,
            )
    return True, "", None


def precheck(
    candidate_source: str,
    entry: str,
    baseline_source: str | None = None,
    filename: str = "<candidate>",
) -> dict | None:
    """Syntax check and static gate without running anything.

    Returns None when the candidate may be run, else a result dict (EvalResult fields):
    ``compile_error`` with the line for a syntax error, ``rejected`` for a gate failure.
    """
    try:
        tree = ast.parse(candidate_source, filename)
    except SyntaxError as exc:
        return _result("compile_error", f"SyntaxError: {exc.msg}", line=exc.lineno)
    except ValueError as exc:  # e.g. null bytes
        return _result("compile_error", f"invalid source: {exc}")
    ok, message, line = static_gate(candidate_source, entry, baseline_source, tree)
    if not ok:
        return _result("rejected", message, line=line)
    return None


# ----------------------------------------------------------------------------------------------
# Roofline
# ----------------------------------------------------------------------------------------------


def match_peak_entry(device_name: str, peaks: dict) -> dict | None:
    """First entry of ``peaks`` (regex pattern -> peak dict) whose pattern matches the device
    name (case-insensitive ``re.search``), else None."""
    for pattern, entry in (peaks or {}).items():
        try:
            if re.search(pattern, device_name or "", re.I):
                return entry
        except re.error:
            continue
    return None


def roofline(
    flops: float | None,
    bytes_: float | None,
    peak: dict,
    *,
    latency_ms: float | None = None,
    low_precision: bool = False,
) -> dict:
    """Roofline time of a kernel and, given its latency, its % of peak.

    Args:
        flops: floating-point operations of one call (FLOP), or None.
        bytes_: bytes moved to/from HBM by one call (B), or None.
        peak: ``{"bf16_tflops", "fp32_tflops", "hbm_gbps"}`` (TFLOP/s = 1e12 FLOP/s,
            GB/s = 1e9 B/s); a missing or None figure drops that roof.
        latency_ms: measured median latency (ms).
        low_precision: use the BF16/FP16 dense tensor peak instead of the FP32 peak.

    Returns:
        dict with ``compute_ms = flops / peak_flops``, ``memory_ms = bytes / peak_bw``,
        ``t_roof_ms = max(compute_ms, memory_ms)``, ``bound`` ("compute" when compute_ms >
        memory_ms, else "memory"), ``peak_tflops``, ``peak_gbps``; with a latency also
        ``pct_of_peak = t_roof_ms / latency_ms * 100`` (None when t_roof_ms is 0),
        ``gbps = bytes / latency / 1e9`` and ``tflops = flops / latency / 1e12``.
        The roofline model: Williams, Waterman, Patterson, CACM 52(4), 2009.
    """
    peak_tflops = peak.get("bf16_tflops" if low_precision else "fp32_tflops")
    peak_gbps = peak.get("hbm_gbps")
    compute_ms = flops / (peak_tflops * 1e12) * 1e3 if flops and peak_tflops else 0.0
    memory_ms = bytes_ / (peak_gbps * 1e9) * 1e3 if bytes_ and peak_gbps else 0.0
    t_roof = max(compute_ms, memory_ms)
    out = {
        "compute_ms": compute_ms,
        "memory_ms": memory_ms,
        "t_roof_ms": t_roof,
        "bound": "compute" if compute_ms > memory_ms else "memory",
        "peak_tflops": peak_tflops,
        "peak_gbps": peak_gbps,
    }
    if latency_ms:
        out["pct_of_peak"] = t_roof / latency_ms * 100.0 if t_roof > 0 else None
        out["gbps"] = bytes_ / (latency_ms * 1e-3) / 1e9 if bytes_ else None
        out["tflops"] = flops / (latency_ms * 1e-3) / 1e12 if flops else None
    return out


# ----------------------------------------------------------------------------------------------
# Result helpers
# ----------------------------------------------------------------------------------------------


def _result(status: str, message: str | None = None, **fields) -> dict:
    out = {"status": status, "message": message, "harness_version": HARNESS_VERSION}
    out.update(fields)
    return out


# ----------------------------------------------------------------------------------------------
# Supervisor
# ----------------------------------------------------------------------------------------------


def supervise(request: dict) -> dict:
    """Run one request in a forked child and return its result dict (never raises).

    Enforces ``request["timeout_s"]`` (kills the child's process group: status ``timeout``),
    and classifies a child that died without a result (``runtime_error`` naming the signal or
    exit code, with the stderr tail).
    """
    timeout_s = float(request.get("timeout_s") or 120.0)
    source_name = str(request.get("source_name") or "candidate.py")
    res_r, res_w = os.pipe()
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    sys.stdout.flush()
    sys.stderr.flush()
    start = time.monotonic()
    parent = os.getpid()
    pid = os.fork()
    if pid == 0:  # child
        try:
            os.close(res_r)
            os.close(out_r)
            os.close(err_r)
            devnull = os.open(os.devnull, os.O_RDONLY)
            os.dup2(devnull, 0)
            os.dup2(out_w, 1)
            os.dup2(err_w, 2)
            os.close(devnull)
            os.close(out_w)
            os.close(err_w)
            _child_main(request, res_w, parent)
        finally:
            os._exit(1)

    os.close(res_w)
    os.close(out_w)
    os.close(err_w)

    def _on_signal(signum, frame):  # cancelled by the target: take the child down with us
        try:
            os.killpg(pid, signal.SIGKILL)
        except OSError:
            pass
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
        os._exit(128 + signum)

    for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
        try:
            signal.signal(sig, _on_signal)
        except (ValueError, OSError):  # not the main thread
            pass

    import selectors

    bufs = {res_r: bytearray(), out_r: bytearray(), err_r: bytearray()}
    out_total = 0
    sel = selectors.DefaultSelector()
    for fd in bufs:
        sel.register(fd, selectors.EVENT_READ)
    timed_out = False
    status = None
    exited_at = None
    while sel.get_map():
        now = time.monotonic()
        if now - start > timeout_s:
            timed_out = True
            break
        if status is None:
            done, st = os.waitpid(pid, os.WNOHANG)
            if done:
                status, exited_at = st, now
        if exited_at is not None and now - exited_at > 1.0:
            break  # a grandchild holds the pipes open; the child itself is gone
        for key, _ in sel.select(timeout=0.05):
            chunk = os.read(key.fd, 65536)
            if not chunk:
                sel.unregister(key.fd)
                continue
            buf = bufs[key.fd]
            buf += chunk
            if key.fd == out_r:
                out_total += len(chunk)
            if key.fd != res_r and len(buf) > 4 * _TAIL_BYTES:
                del buf[: len(buf) - _TAIL_BYTES]
    sel.close()
    if not timed_out and status is None:
        while time.monotonic() - start <= timeout_s:
            done, st = os.waitpid(pid, os.WNOHANG)
            if done:
                status = st
                break
            time.sleep(0.01)
        else:
            timed_out = True
    try:
        os.killpg(pid, signal.SIGKILL)  # leftovers of the candidate's process group
    except OSError:
        pass
    if status is None:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
        try:
            _, status = os.waitpid(pid, 0)
        except ChildProcessError:
            status = 0
    for fd in bufs:
        os.close(fd)

    stderr = bytes(bufs[err_r])
    result = None
    if not timed_out and bufs[res_r]:
        try:
            result = json.loads(bytes(bufs[res_r]).decode("utf-8", "replace"))
        except ValueError:
            result = None
    if timed_out:
        result = _result(
            "timeout",
            f"no result within {timeout_s:g} s; the candidate's processes were killed",
            line=_line_from_text(stderr.decode("utf-8", "replace"), source_name),
        )
    elif not isinstance(result, dict) or result.get("status") is None:
        if os.WIFSIGNALED(status):
            sig = os.WTERMSIG(status)
            try:
                what = signal.strsignal(sig)
            except (ValueError, AttributeError):
                what = None
            how = f"was killed by {signal_name(sig)}" + (f" ({what.lower()})" if what else "")
        else:
            how = f"exited with code {os.WEXITSTATUS(status)}"
        text = stderr.decode("utf-8", "replace")
        fatal = re.search(r"^Fatal Python error: .*$", text, re.M)
        excerpt = fatal.group(0) if fatal else tail(stderr, 400)
        result = _result(
            "runtime_error",
            f"the candidate process {how} without a result"
            + (f"; stderr: {excerpt}" if excerpt else ""),
            line=_line_from_text(text, source_name),
        )
    if out_total:
        result.setdefault("warnings", [])
        result["warnings"].append(
            f"the candidate wrote {out_total} bytes to stdout (ignored): "
            f"{tail(bytes(bufs[out_r]), 200)!r}"
        )
    result.setdefault("harness_version", HARNESS_VERSION)
    return result


def _line_from_text(text: str, source_name: str) -> int | None:
    """Last ``File "<candidate:NAME>", line N`` in a traceback / faulthandler dump."""
    fake = re.escape(f"<candidate:{source_name}>")
    lines = re.findall(rf'File "{fake}", line (\d+)', text)
    return int(lines[0 if "most recent call first" in text else -1]) if lines else None


def main() -> None:
    """Read one request (JSON) from stdin, evaluate it, print one sentinel result line."""
    raw = sys.stdin.buffer.read()
    try:
        request = json.loads(raw.decode("utf-8"))
        if not isinstance(request, dict):
            raise ValueError("not a JSON object")
    except ValueError as exc:
        result = _result("runtime_error", f"bad request on the worker's stdin: {exc}")
    else:
        try:
            result = supervise(request)
        except Exception as exc:  # the supervisor itself failed (e.g. fork impossible)
            result = _result("runtime_error", f"worker supervisor failed: {exc!r}")
    sys.stdout.write("\n" + SENTINEL + json.dumps(result, default=str) + "\n")
    sys.stdout.flush()


# ----------------------------------------------------------------------------------------------
# Child: the evaluation itself
# ----------------------------------------------------------------------------------------------


class _Emitter:
    """Writes the result exactly once to the result pipe (main thread or watchdog)."""

    def __init__(self, fd: int) -> None:
        import threading

        self.fd = fd
        self.lock = threading.Lock()
        self.done = False

    def emit(self, result: dict) -> None:
        with self.lock:
            if self.done:
                return
            self.done = True
            data = json.dumps(result, default=str).encode()
            view = memoryview(data)
            while view:
                n = os.write(self.fd, view)
                view = view[n:]
            os.close(self.fd)


def _set_pdeathsig() -> None:
    """Linux: SIGKILL this process when the supervisor dies."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG = 1
    except Exception:
        pass


def _child_main(request: dict, result_fd: int, supervisor_pid: int) -> None:
    try:
        os.setsid()
    except OSError:
        pass
    _set_pdeathsig()
    if os.getppid() != supervisor_pid:
        os._exit(1)
    import faulthandler

    faulthandler.enable(file=sys.stderr)  # a crash dumps the Python stack (with the line)
    timeout_s = float(request.get("timeout_s") or 120.0)
    # Just before the supervisor's deadline, dump where the candidate hangs.
    faulthandler.dump_traceback_later(max(timeout_s - 0.5, timeout_s * 0.9), exit=False)
    emitter = _Emitter(result_fd)
    ctx = {"emitter": emitter, "supervisor": supervisor_pid}
    try:
        if request.get("probe"):
            result = _probe(request, ctx)
        else:
            result = _evaluate(request, ctx)
    except BaseException as exc:  # noqa: BLE001 - classified, never propagated
        result = _result("runtime_error", f"worker error: {type(exc).__name__}: {exc}")
    sys.stdout.flush()
    sys.stderr.flush()
    emitter.emit(result)
    os._exit(0)


def _pin_device(device) -> None:
    if device is None or device == "":
        return
    device = str(device)
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible and device.isdigit():
        ids = [v.strip() for v in visible.split(",") if v.strip()]
        if int(device) < len(ids):
            device = ids[int(device)]
    os.environ["CUDA_VISIBLE_DEVICES"] = device
    os.environ["NEURON_RT_VISIBLE_CORES"] = str(device)


def _rss_bytes() -> int | None:
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return None


def _vm_bytes() -> int | None:
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return None


def _limit_memory(limit_mb: int, use_cuda: bool, ctx: dict) -> None:
    """RLIMIT_AS (CPU only: CUDA maps huge virtual ranges) = current address space + limit,
    and a watchdog thread that aborts with "memory limit exceeded" when RSS > limit."""
    import threading

    limit = int(limit_mb) * 1024 * 1024
    if not use_cuda:
        try:
            import resource

            vm = _vm_bytes() or 0
            _, hard = resource.getrlimit(resource.RLIMIT_AS)
            soft = vm + limit
            if hard != resource.RLIM_INFINITY:
                soft = min(soft, hard)
            resource.setrlimit(resource.RLIMIT_AS, (soft, hard))
        except (ImportError, ValueError, OSError):
            pass
    emitter: _Emitter = ctx["emitter"]
    supervisor = ctx["supervisor"]

    def watch() -> None:
        while True:
            time.sleep(_WATCHDOG_PERIOD_S)
            if os.getppid() != supervisor:
                os._exit(1)
            rss = _rss_bytes()
            if rss is not None and rss > limit:
                emitter.emit(
                    _result(
                        "runtime_error",
                        f"memory limit exceeded: resident memory {rss / 2**20:.0f} MiB > "
                        f"{limit_mb} MiB",
                    )
                )
                os._exit(3)

    threading.Thread(target=watch, name="accelopt-memory-watchdog", daemon=True).start()


def _versions(torch=None, triton=None) -> dict:
    import platform

    out = {"python": platform.python_version()}
    if torch is not None:
        out["torch"] = torch.__version__
    if triton is not None:
        out["triton"] = triton.__version__
    try:
        from importlib import metadata

        for dist in ("numpy", "neuronxcc"):
            try:
                out[dist] = metadata.version(dist)
            except metadata.PackageNotFoundError:
                pass
    except ImportError:
        pass
    lnc = os.environ.get("NEURON_LOGICAL_NC_CONFIG")
    if lnc:
        out["lnc"] = lnc
    return out


def _probe(request: dict, ctx: dict) -> dict:
    """Device names and versions (no candidate)."""
    _pin_device(request.get("device"))
    try:
        import torch
    except ImportError as exc:
        return _result(
            "runtime_error", f"torch is not installed for {sys.executable}: {exc}", device=None
        )
    names = []
    if torch.cuda.is_available():
        names = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
    try:
        import triton
    except ImportError:
        triton = None
    return _result(
        "ok",
        "probe",
        device=names[0] if names else "cpu",
        devices=names or ["cpu"],
        timing="cuda" if names else "interpreter",
        versions=_versions(torch, triton),
    )


class _Failure(Exception):
    """A classified failure: carries the result dict."""

    def __init__(self, result: dict) -> None:
        super().__init__(result.get("message"))
        self.result = result


def _load_module(name: str, source: str, filename: str):
    import linecache
    import types

    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    module = types.ModuleType(name)
    module.__file__ = filename
    sys.modules[name] = module
    exec(compile(source, filename, "exec", dont_inherit=True), module.__dict__)
    return module


def _exc_chain(exc: BaseException) -> list[BaseException]:
    chain = []
    while exc is not None and exc not in chain:
        chain.append(exc)
        exc = exc.__cause__ or exc.__context__
    return chain


def _candidate_frame(exc: BaseException, filename: str) -> tuple[BaseException, int | None]:
    """The innermost exception in the chain with a frame in the candidate, and that line."""
    best: tuple[BaseException, int | None] = (exc, None)
    for e in _exc_chain(exc):
        tb = e.__traceback__
        line = None
        while tb is not None:
            if tb.tb_frame.f_code.co_filename == filename:
                line = tb.tb_lineno
            tb = tb.tb_next
        if line is not None:
            best = (e, line)
    return best


def _compilation_error(exc: BaseException):
    for e in _exc_chain(exc):
        if type(e).__name__ in (
            "CompilationError",
            "CompileTimeAssertionFailure",
            "UnsupportedLanguageConstruct",
        ) and hasattr(e, "node"):
            return e
    return None


def _translate_compile_line(err, tree: ast.Module | None) -> int | None:
    """Triton's CompilationError line is relative to the kernel's ``def`` line."""
    rel = getattr(getattr(err, "node", None), "lineno", None)
    src = getattr(err, "src", None)
    if rel is None or not src or tree is None:
        return None
    m = re.search(r"^\s*def\s+(\w+)", src, re.M)
    if not m:
        return None
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == m.group(1):
            return node.lineno + rel - 1
    return None


def _is_memory_error(exc: BaseException) -> bool:
    for e in _exc_chain(exc):
        if isinstance(e, MemoryError):
            return True
        text = str(e)
        if "can't allocate memory" in text or "out of memory" in text.lower():
            return True
    return False


def _short(exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}"
    return text if len(text) <= 600 else text[:600] + "..."


def _classify(exc: BaseException, phase: str, ctx: dict) -> dict:
    """Turn an exception raised while loading/running the candidate into a result dict."""
    filename = ctx["cand_file"]
    if _is_memory_error(exc):
        root = _exc_chain(exc)[-1]
        return _result(
            "runtime_error",
            f"memory limit exceeded ({ctx['memory_limit_mb']} MiB) or out of memory: "
            f"{_short(root)}",
            line=_candidate_frame(exc, filename)[1],
        )
    comp = _compilation_error(exc)
    if comp is not None:
        line = _translate_compile_line(comp, ctx.get("cand_tree"))
        msg = getattr(comp, "error_message", None) or str(comp).strip().splitlines()[-1]
        return _result("compile_error", f"Triton compilation error: {msg}", line=line)
    inner, line = _candidate_frame(exc, filename)
    if phase == "load":
        return _result("compile_error", f"loading the candidate failed: {_short(inner)}", line=line)
    kernel = _kernel_at(ctx.get("cand_tree"), ctx.get("kernels", {}), line)
    if kernel and ctx.get("interpreter"):
        return _result(
            "compile_error",
            f"error in kernel '{kernel}' (Triton interpreter): {_short(inner)}",
            line=line,
        )
    where = f" in kernel '{kernel}'" if kernel else ""
    return _result("runtime_error", f"error while running{where}: {_short(inner)}", line=line)


def _kernel_at(tree: ast.Module | None, kernels: dict, line: int | None) -> str | None:
    if tree is None or line is None:
        return None
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name in kernels:
            if node.lineno <= line <= (node.end_lineno or node.lineno):
                return node.name
    return None


def _clone(obj):
    """Deep copy of inputs: tensors cloned, arrays copied, containers rebuilt."""
    if hasattr(obj, "clone") and hasattr(obj, "data_ptr"):
        return obj.clone()
    if type(obj).__name__ == "ndarray":
        return obj.copy()
    if isinstance(obj, (list, tuple)):
        return type(obj)(_clone(o) for o in obj)
    if isinstance(obj, dict):
        return {k: _clone(v) for k, v in obj.items()}
    return obj


def _is_tensor(obj) -> bool:
    return hasattr(obj, "data_ptr") and hasattr(obj, "dtype") and hasattr(obj, "shape")


def _is_array(obj) -> bool:
    return type(obj).__name__ == "ndarray"


def _to_numpy(t):
    """Float64/raw numpy copy on the host (bf16/float8 via float32)."""
    import numpy as np

    if _is_tensor(t):
        t = t.detach().cpu()
        name = str(t.dtype).replace("torch.", "")
        if name == "bfloat16" or name.startswith("float8"):
            t = t.float()
        return t.numpy()
    return np.asarray(t)


def _dtype_name(t) -> str:
    return str(t.dtype).replace("torch.", "")


def _same_values(a, b) -> bool:
    import numpy as np

    x, y = _to_numpy(a), _to_numpy(b)
    if x.shape != y.shape:
        return False
    if np.issubdtype(x.dtype, np.floating):
        return bool(np.array_equal(x, y, equal_nan=True))
    return bool(np.array_equal(x, y))


def _leaves(obj, path=""):
    if isinstance(obj, (list, tuple)):
        for i, o in enumerate(obj):
            yield from _leaves(o, f"{path}[{i}]")
    else:
        yield path, obj


def _compare(out, ref, bench: dict, errors: dict) -> str | None:
    """None when ``out`` matches ``ref`` within tolerance, else the reason.

    Tolerance scaled to magnitude: ``|out-ref| <= atol*max|ref| + rtol*|ref|`` elementwise
    (an all-zero output fails unless the reference is all zero). NaN/Inf where the reference is
    finite fails. ``errors`` accumulates ``max_abs`` and ``max_rel`` (= max|out-ref| / max|ref|).
    """
    import numpy as np

    if isinstance(ref, (list, tuple)):
        if not isinstance(out, (list, tuple)) or len(out) != len(ref):
            got = f"{type(out).__name__}" + (
                f" of {len(out)}" if isinstance(out, (list, tuple)) else ""
            )
            return f"output structure differs: got {got}, expected {len(ref)} outputs"
        for i, (o, r) in enumerate(zip(out, ref, strict=False)):
            why = _compare(o, r, bench, errors)
            if why:
                return f"output #{i}: {why}"
        return None
    if not (_is_tensor(ref) or _is_array(ref)):
        return None if out == ref else f"got {out!r}, expected {ref!r}"
    if not (_is_tensor(out) or _is_array(out)):
        return f"got a {type(out).__name__}, expected a tensor"
    if tuple(out.shape) != tuple(ref.shape):
        return f"shape {tuple(out.shape)} differs from the reference {tuple(ref.shape)}"
    if _dtype_name(out) != _dtype_name(ref):
        return f"dtype {_dtype_name(out)} differs from the reference {_dtype_name(ref)}"
    o, r = _to_numpy(out), _to_numpy(ref)
    if not np.issubdtype(r.dtype, np.floating):
        bad = int(np.count_nonzero(o != r))
        return f"{bad} elements differ (exact comparison)" if bad else None
    o = o.astype(np.float64)
    r = r.astype(np.float64)
    name = _dtype_name(ref)
    default = _FLOAT8_TOLERANCE if name.startswith("float8") else DEFAULT_TOLERANCES.get(name)
    default = default or DEFAULT_TOLERANCES["float32"]
    rtol = float(bench.get("rtol", default[0]))
    atol = float(bench.get("atol", default[1]))
    finite = np.isfinite(r)
    bad = finite & ~np.isfinite(o)
    if bad.any():
        idx = tuple(int(i) for i in np.argwhere(bad)[0])
        return f"NaN/Inf in the output where the reference is finite (first at index {idx})"
    special = ~finite & ~((o == r) | (np.isnan(o) & np.isnan(r)))
    if special.any():
        idx = tuple(int(i) for i in np.argwhere(special)[0])
        return f"non-finite reference value not reproduced at index {idx}"
    diff = np.where(finite, np.abs(o - r), 0.0)
    scale = float(np.abs(r[finite]).max()) if finite.any() else 0.0
    max_abs = float(diff.max()) if diff.size else 0.0
    max_rel = max_abs / scale if scale > 0 else (0.0 if max_abs == 0 else float("inf"))
    errors["max_abs"] = max(errors.get("max_abs", 0.0), max_abs)
    errors["max_rel"] = max(errors.get("max_rel", 0.0), max_rel)
    viol = diff > atol * scale + rtol * np.abs(r)
    if viol.any():
        idx = tuple(int(i) for i in np.argwhere(viol)[0])
        return (
            f"mismatch at index {idx}: got {o[idx]:.6g}, expected {r[idx]:.6g} "
            f"(max abs error {max_abs:.3g}; tolerance {atol:g}*max|ref| + {rtol:g}*|ref|, "
            f"max|ref| = {scale:.3g}; {int(viol.sum())} of {viol.size} elements outside)"
        )
    return None


def _percentile(sorted_vals: list[float], q: float) -> float:
    if len(sorted_vals) == 1:
        return sorted_vals[0]
    pos = q * (len(sorted_vals) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(sorted_vals) - 1)
    return sorted_vals[lo] + (sorted_vals[hi] - sorted_vals[lo]) * (pos - lo)


def _entry_kind(request: dict) -> str:
    """ "nki" when the entry launches an @nki.jit kernel, else "triton" (from the AST)."""
    try:
        tree = ast.parse(request["candidate_source"])
    except (SyntaxError, KeyError, TypeError):
        return "triton"
    aliases = _aliases(tree)
    kernels = _jit_kernels(tree, aliases)
    entry = request.get("entry", "")
    if kernels.get(entry) == "nki":
        return "nki"
    nki = {k: v for k, v in kernels.items() if v == "nki"}
    if nki and any(_launches(fn, nki) for fn in _launcher_closure(tree, entry, kernels)):
        return "nki"
    return "triton"


def _evaluate(req: dict, ctx: dict) -> dict:
    source_name = str(req.get("source_name") or "candidate.py")
    cand_src = req["candidate_source"]
    harness_src = req["harness_source"]
    entry_name = req["entry"]
    baseline = req.get("baseline_source") or harness_src
    cand_file = f"<candidate:{source_name}>"
    ctx.update(cand_file=cand_file, memory_limit_mb=req.get("memory_limit_mb", 8192))

    pre = precheck(cand_src, entry_name, baseline, cand_file)
    if pre is not None:
        return pre
    ctx["cand_tree"] = tree = ast.parse(cand_src)
    ctx["kernels"] = _jit_kernels(tree, _aliases(tree))
    _pin_device(req.get("device"))
    if _entry_kind(req) == "nki":
        return _evaluate_nki(req, ctx)

    timing_mode = req.get("timing") or "auto"
    try:
        import torch
    except ImportError as exc:
        return _result(
            "runtime_error", f"torch is not installed for {sys.executable} on this target: {exc}"
        )
    use_cuda = timing_mode == "auto" and torch.cuda.is_available()
    if not use_cuda:
        os.environ["TRITON_INTERPRET"] = "1"
    ctx["interpreter"] = not use_cuda
    try:
        import triton
    except ImportError as exc:
        return _result(
            "runtime_error", f"triton is not installed for {sys.executable} on this target: {exc}"
        )
    device = "cuda" if use_cuda else "cpu"
    device_name = torch.cuda.get_device_name(0) if use_cuda else "cpu"
    env = {"device": device_name, "versions": _versions(torch, triton)}
    _limit_memory(int(req.get("memory_limit_mb") or 8192), use_cuda, ctx)

    def fail(result: dict) -> dict:
        result.update(env)
        return result

    # The original file: get_inputs / reference / BENCH always come from it.
    try:
        harness = _load_module("accelopt_harness", harness_src, f"<harness:{source_name}>")
        get_inputs = harness.get_inputs
        reference = harness.reference
        bench = dict(harness.BENCH)
    except BaseException as exc:  # noqa: BLE001
        return fail(
            _result(
                "runtime_error",
                f"the original file's harness (get_inputs, reference, BENCH) failed to load: "
                f"{_short(exc)}",
            )
        )
    try:
        cand = _load_module("accelopt_candidate", cand_src, cand_file)
        entry = getattr(cand, entry_name)
    except BaseException as exc:  # noqa: BLE001
        return fail(_classify(exc, "load", ctx))

    def sync() -> None:
        if use_cuda:
            torch.cuda.synchronize()

    errors: dict = {}
    seeds = list(req.get("seeds") or [1])
    for seed in seeds:
        try:
            inputs = tuple(get_inputs(seed, device))
            expected = reference(*_clone(inputs))
            sync()
        except BaseException as exc:  # noqa: BLE001
            return fail(
                _result("runtime_error", f"the harness failed on seed {seed}: {_short(exc)}")
            )
        before = _clone(inputs)
        try:
            out = entry(*inputs)
            sync()
        except BaseException as exc:  # noqa: BLE001
            return fail(_classify(exc, "run", ctx))
        for i, (a, b) in enumerate(zip(inputs, before, strict=False)):
            if (_is_tensor(a) or _is_array(a)) and not _same_values(a, b):
                return fail(
                    _result("incorrect", f"mutated input #{i} (seed {seed}); inputs are read-only")
                )
        why = _compare(out, expected, bench, errors)
        if why:
            return fail(
                _result(
                    "incorrect",
                    f"seed {seed}: {why}",
                    max_abs_error=errors.get("max_abs"),
                    max_rel_error=errors.get("max_rel"),
                )
            )
    result = _result(
        "ok",
        f"correct on {len(seeds)} seeds",
        max_abs_error=errors.get("max_abs"),
        max_rel_error=errors.get("max_rel"),
        timing="none",
        **env,
    )
    if timing_mode == "none":
        return result

    try:
        inputs = tuple(get_inputs(int(req.get("timing_seed", 1000)), device))
    except BaseException as exc:  # noqa: BLE001
        return fail(
            _result("runtime_error", f"the harness failed on the timing seed: {_short(exc)}")
        )
    try:
        if use_cuda:
            import triton.testing

            med, p20, p80 = triton.testing.do_bench(
                lambda: entry(*inputs),
                warmup=float(req.get("warmup_ms", 25.0)),
                rep=float(req.get("rep_ms", 100.0)),
                quantiles=[0.5, 0.2, 0.8],
            )
            timing = "cuda"
        else:
            rep_s = float(req.get("rep_ms", 100.0)) / 1000.0
            entry(*inputs)  # warm-up (the interpreter has no compile step to hide)
            times: list[float] = []
            total = 0.0
            while len(times) < _INTERP_MAX_RUNS and (
                len(times) < _INTERP_MIN_RUNS or total < rep_s
            ):
                t0 = time.perf_counter()
                entry(*inputs)
                dt = time.perf_counter() - t0
                times.append(dt * 1000.0)
                total += dt
            times.sort()
            med, p20, p80 = (_percentile(times, q) for q in (0.5, 0.2, 0.8))
            timing = "interpreter"
    except BaseException as exc:  # noqa: BLE001
        return fail(_classify(exc, "run", ctx))
    result.update(latency_ms=med, p20_ms=p20, p80_ms=p80, timing=timing)
    result["message"] = f"correct on {len(seeds)} seeds" + (
        "; Triton interpreter on CPU: latency says nothing about GPU speed"
        if timing == "interpreter"
        else ""
    )
    _plausibility(result, bench, inputs, req.get("peaks") or {}, timing)
    return result


def _plausibility(result: dict, bench: dict, inputs: tuple, peaks: dict, timing: str) -> None:
    """gbps/tflops from BENCH's bytes/flops; % of peak (GPU/Neuron timing only); > 100% of
    peak -> status "rejected" ("implausible")."""
    work = {}
    for key in ("flops", "bytes"):
        fn = bench.get(key)
        if fn is None:
            continue
        try:
            work[key] = float(fn(*inputs))
        except BaseException as exc:  # noqa: BLE001
            result.setdefault("warnings", []).append(f"BENCH['{key}'] failed: {_short(exc)}")
    if not work:
        return
    low = any(
        _is_tensor(t) and _dtype_name(t) in ("float16", "bfloat16") for t in inputs if _is_tensor(t)
    ) or any(_is_array(t) and str(t.dtype) in ("float16", "bfloat16") for t in inputs)
    latency = result["latency_ms"]
    roof = roofline(work.get("flops"), work.get("bytes"), {}, latency_ms=latency)
    result["gbps"], result["tflops"] = roof["gbps"], roof["tflops"]
    if timing not in ("cuda", "neuron"):
        return
    peak = match_peak_entry(result.get("device") or "", peaks)
    if peak is None:
        return
    roof = roofline(
        work.get("flops"), work.get("bytes"), peak, latency_ms=latency, low_precision=low
    )
    pct = roof.get("pct_of_peak")
    if pct is None:
        return
    result["pct_of_peak"] = pct
    result["bound"] = roof["bound"]
    if pct > 100.0:
        result["status"] = "rejected"
        result["message"] = (
            f"implausible: {pct:.0f}% of peak ({roof['bound']} roof on {result.get('device')}); "
            "the timing or the harness's flops/bytes are wrong"
        )


def _evaluate_nki(req: dict, ctx: dict) -> dict:
    """NKI path: numpy inputs, nki.benchmark timing. Needs the Neuron SDK (neuronxcc)."""
    import importlib.util

    if importlib.util.find_spec("neuronxcc") is None:
        return _result(
            "runtime_error",
            "Neuron SDK (neuronxcc) not installed on this target",
            versions=_versions(),
        )
    try:  # EC2 Nitro: the instance type, e.g. trn1.2xlarge
        with open("/sys/devices/virtual/dmi/id/product_name") as f:
            device_name = f.read().strip() + " NeuronCore"
    except OSError:
        device_name = "NeuronCore"
    env = {"device": device_name, "versions": _versions()}
    _limit_memory(int(req.get("memory_limit_mb") or 8192), True, ctx)
    ctx["interpreter"] = False
    source_name = str(req.get("source_name") or "candidate.py")
    try:
        harness = _load_module(
            "accelopt_harness", req["harness_source"], f"<harness:{source_name}>"
        )
        get_inputs, reference, bench = harness.get_inputs, harness.reference, dict(harness.BENCH)
        cand = _load_module("accelopt_candidate", req["candidate_source"], ctx["cand_file"])
        entry = getattr(cand, req["entry"])
    except BaseException as exc:  # noqa: BLE001
        return dict(_classify(exc, "load", ctx), **env)
    errors: dict = {}
    seeds = list(req.get("seeds") or [1])
    for seed in seeds:
        inputs = tuple(get_inputs(seed, "cpu"))
        expected = reference(*_clone(inputs))
        before = _clone(inputs)
        try:
            out = entry(*inputs)
        except BaseException as exc:  # noqa: BLE001
            return dict(_classify(exc, "run", ctx), **env)
        for i, (a, b) in enumerate(zip(inputs, before, strict=False)):
            if _is_array(a) and not _same_values(a, b):
                return _result("incorrect", f"mutated input #{i} (seed {seed})", **env)
        why = _compare(out, expected, bench, errors)
        if why:
            return _result("incorrect", f"seed {seed}: {why}", **env)
    result = _result(
        "ok",
        f"correct on {len(seeds)} seeds",
        max_abs_error=errors.get("max_abs"),
        max_rel_error=errors.get("max_rel"),
        **env,
    )
    if req.get("timing") == "none":
        return result
    try:
        from neuronxcc import nki

        kernel = getattr(cand, req["entry"])
        kernels = [k for k, v in ctx["kernels"].items() if v == "nki"]
        if req["entry"] not in ctx["kernels"] and len(kernels) == 1:
            kernel = getattr(cand, kernels[0])  # assumes the launcher forwards its inputs
        inputs = tuple(get_inputs(int(req.get("timing_seed", 1000)), "cpu"))
        bench_fn = nki.benchmark(warmup=5, iters=20)(getattr(kernel, "func", kernel))
        bench_fn(*inputs)
        lat = bench_fn.benchmark_result.nc_latency
        result.update(
            latency_ms=lat.get_latency_percentile(50) / 1000.0,
            p20_ms=lat.get_latency_percentile(20) / 1000.0,
            p80_ms=lat.get_latency_percentile(80) / 1000.0,
            timing="neuron",
        )
    except BaseException as exc:  # noqa: BLE001
        return dict(_classify(exc, "run", ctx), **env)
    _plausibility(result, bench, inputs, req.get("peaks") or {}, "neuron")
    return result


if __name__ == "__main__":
    main()
