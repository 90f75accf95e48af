"""The reference process (issue 10): the original file's harness runs here, not in the judge.

The judge never executes user or candidate code. The ORIGINAL file (whose ``get_inputs``,
``reference`` and ``BENCH`` define correctness) is the user's code; under ``accelopt profile``
the profiled file is both the original and the candidate, so it may be just as hostile as a
candidate: module-level code that finds the judge's result emitter, writes to its fds or
patches the libraries the comparison uses. So the judge forks this process, with the same
isolation as the candidate process (:func:`.contestant.process.isolate`: fds closed, death with the
judge, capabilities dropped, private directories), right after the candidate process and
before it touches CUDA. It loads the harness and answers over :mod:`.runtime.channel`; inputs and
reference outputs come back as sealed shared-memory segments (:mod:`.runtime.exchange`, issue
50), which the judge maps as data and forwards to the candidate without a copy.

Messages (judge -> reference process, one JSON line each; answers below):

- first, unasked: ``{"bench": {"rtol", "atol"}[, "shapes": [...]]}`` (the numeric tolerances
  of ``BENCH`` and its ``shapes``: ``get_inputs`` keyword arguments, issue 13) or
  ``{"error": result}`` (the harness failed to load, or replaced a library function the
  reference uses: :mod:`.judge.integrity`);
- ``{"op": "cases", "seeds": [s, ...], "expected": bool}``: ``get_inputs(s, device)`` for
  each seed (kept for later ``expected`` requests), and with ``expected`` ``reference`` on a
  copy; answer ``{"done": true, "inputs": [segment, ...], "expected": [segment, ...]}``
  (:class:`.runtime.exchange.Segment`; ``expected`` empty without);
- ``{"op": "expected", "seeds": [...]}``: the reference of inputs made earlier, answer
  ``{"done": true, "expected": [segment, ...]}``;
- ``{"op": "work", "seed": s}``: ``BENCH["flops"]`` / ``BENCH["bytes"]`` of that seed's inputs,
  answer ``{"work": {"flops": F, "bytes": B}, "warnings": [...]}``;
- ``{"op": "derived_plan", "seed": s}``: the derived inputs of that seed's inputs (issues 22
  and 29, :func:`.derived_inputs.plan`, inputs named by ``reference``'s parameters), answer
  ``{"plan": {"derived": [...], "skipped": [...]}}``;
- ``{"op": "derived", "seed": s, "derive": descriptor}``: the inputs of that derived input
  (:func:`.derived_inputs.apply`) and ``reference`` on a copy, as ``cases`` (one segment
  each); answer ``{"done": true, "skip": why}`` instead when the derivation does not apply,
  the reference raises on them, or it changes values and the reference overflows (the derived
  input is then not used, never a failure);
- ``{"op": "exit"}``.

Every request may carry ``"shape": {...}``: the inputs are then ``get_inputs(seed, device,
**shape)``. A harness that raises answers ``{"error": result}`` (``runtime_error`` naming the
harness part).
"""

from __future__ import annotations

import json
import os

from ..protocol import result_dict
from ..runtime import exchange
from ..runtime.channel import Channel, serve_requests
from ..runtime.failures import short
from ..runtime.loading import load_harness, rebind_sizes
from . import integrity
from .compare import clone, shape_text
from .reference import number


class _Referee:
    """The loaded harness and the inputs made so far, by seed."""

    def __init__(self, setup: dict) -> None:
        import torch

        self.torch = torch
        self.use_cuda = bool(setup["use_cuda"])
        self.device = "cuda" if self.use_cuda else "cpu"
        try:
            import numpy
        except ImportError:
            numpy = None
        self.numpy = numpy
        self.harness = None
        self.backward = False
        self.grad_inputs: list[int] = []
        self.inputs: dict[tuple, tuple] = {}
        self.base_nonfinite: dict[tuple, int] = {}  # NaN/Inf of the reference, by seed, shape

    def sync(self) -> None:
        if self.use_cuda:
            self.torch.cuda.synchronize()

    def load(self, source: str, source_name: str, project: dict | None = None) -> dict:
        """The first message: the tolerances, or the load error / the poisoning found."""
        before = integrity.snapshot()
        try:
            self.harness = load_harness(source, source_name, project, sizes=False)
        except BaseException as exc:  # noqa: BLE001
            where, line = _load_site(exc, project)
            return {
                "error": result_dict(
                    "runtime_error",
                    "the harness (get_inputs, reference, BENCH), or a module it imports, failed "
                    f"to load: {short(exc)}{where}",
                    line=line,
                )
            }
        patched = integrity.replaced(before)
        if patched:
            more = f" and {len(patched) - 3} more" if len(patched) > 3 else ""
            return {
                "error": result_dict(
                    "rejected",
                    "reference poisoning: the original file's module-level code replaces "
                    f"{', '.join(patched[:3])}{more}, which the reference uses; the judge "
                    "cannot trust its reference",
                    rule=integrity.POISON_RULE,
                )
            }
        rebind_sizes(self.harness, project)  # after the poisoning check (issue 24)
        bench = self.harness.bench
        first = {"bench": {k: number(bench.get(k)) for k in ("rtol", "atol") if k in bench}}
        if self.harness.sizes:  # rebound for the CPU interpreter / pinned (issue 24)
            first["sizes"] = self.harness.sizes
        self.backward = bool(bench.get("backward"))
        if self.backward:
            first["backward"] = True
        shapes = bench.get("shapes")
        if shapes is not None:
            problem = _shapes_problem(shapes)
            if problem:
                return {"error": result_dict("runtime_error", problem)}
            first["shapes"] = [dict(s) for s in shapes]
        return first

    def _make(self, seed: int, shape: dict | None = None) -> tuple:
        """``get_inputs(seed, device, **shape)``, kept by seed and shape. Raises TypeError
        naming the mistake when it returns one tensor or array instead of a tuple
        (``tuple(x)`` would split a tensor into its rows and call ``reference`` with each)."""
        key = (seed, json.dumps(shape, sort_keys=True))
        if key not in self.inputs:
            got = self.harness.get_inputs(seed, self.device, **(shape or {}))
            if not isinstance(got, (tuple, list)):
                raise TypeError(
                    f"get_inputs({seed}, {self.device!r}) returned a {type(got).__name__}, not "
                    "a tuple of inputs; for one input write `return (x,)`"
                )
            self.inputs[key] = tuple(got)
            if self.backward:
                from ..contestant.backward import requires_grad_indices

                self.grad_inputs = requires_grad_indices(self.inputs[key], self.torch)
            self.sync()
        return self.inputs[key]

    def _share(self, obj) -> exchange.Segment:
        """``obj`` in a sealed segment (sent, then closed, by the request loop)."""
        return exchange.share(obj, torch=self.torch, numpy=self.numpy)

    def _answer(self, **segments) -> dict:
        """``{"done": true, "grad_inputs": [i, ...], **segments}`` (``grad_inputs``: the
        inputs that require grad, backward only)."""
        return {"done": True, "grad_inputs": self.grad_inputs, **segments}

    def cases(self, msg: dict) -> dict:
        shape = msg.get("shape")
        ins, refs = [], []
        for seed in msg["seeds"]:
            ins.append(self._share(self._make(int(seed), shape)))
            if msg.get("expected"):
                refs.append(self._share(self._reference(int(seed), shape, int(seed))))
        return self._answer(inputs=ins, expected=refs)

    def _reference(self, seed: int, shape: dict | None, grad_seed: int | None):
        """``reference`` on a copy of the inputs of ``seed``; with ``BENCH["backward"]``,
        forward + backward (:func:`.contestant.backward.forward_backward`, upstream gradient from
        ``grad_seed``, all ones when None)."""
        return self._reference_on(self._make(seed, shape), grad_seed)

    def _reference_on(self, inputs: tuple, grad_seed: int | None):
        """``reference`` on a copy of ``inputs`` (forward + backward with ``BENCH["backward"]``)."""
        if self.backward:
            from ..contestant.backward import forward_backward, leaves

            out = forward_backward(
                self.harness.reference, leaves(inputs, self.torch), grad_seed, self.torch
            )
        else:
            out = self.harness.reference(*clone(inputs))
        self.sync()
        return out

    def derived_plan(self, msg: dict) -> dict:
        """The derived inputs of the inputs of ``msg["seed"]`` (:func:`.derived_inputs.plan`:
        shapes, values bounded by ``BENCH["values"]``, layouts)."""
        from .derived import parameter_names
        from .derived_inputs import plan

        inputs = self._make(int(msg["seed"]), msg.get("shape"))
        names = parameter_names(self.harness.reference)
        values = self.harness.bench.get("values")
        return {"plan": plan(inputs, names, values=values, torch=self.torch)}

    def derived(self, msg: dict) -> dict:
        """The inputs and reference of one derived input, or ``skip`` with the reason (the
        derivation does not apply, the reference raises on it, or it changes values and the
        reference is not finite where it is on the seed's own inputs)."""
        from .derived_inputs import apply, has_values

        seed, shape = int(msg["seed"]), msg.get("shape")
        try:
            inputs = apply(self._make(seed, shape), msg["derive"], self.torch)
        except (ValueError, KeyError, TypeError, IndexError, RuntimeError) as exc:
            return {**self._answer(), "skip": f"the derivation does not apply: {short(exc)}"}
        self.sync()
        try:
            out = self._reference_on(inputs, seed)
        except Exception as exc:  # noqa: BLE001 - the harness's reference: a reason, not a failure
            return {**self._answer(), "skip": f"the reference raises on it: {short(exc)}"}
        if has_values(msg["derive"]):
            why = self._overflow(out, seed, shape, msg["derive"])
            if why:
                return {**self._answer(), "skip": why}
        return self._answer(inputs=self._share(inputs), expected=self._share(out))

    def _overflow(self, out, seed: int, shape: dict | None, desc: dict) -> str | None:
        """:func:`.derived_checks.overflow` of ``out``, the reference on the derived input
        ``desc``, with the reference on the seed's own inputs computed once per seed and
        shape."""
        from .compare import nonfinite
        from .derived_checks import overflow

        key = (seed, json.dumps(shape, sort_keys=True))

        def base() -> int:
            if key not in self.base_nonfinite:
                self.base_nonfinite[key] = nonfinite(self._reference(seed, shape, seed))[0]
            return self.base_nonfinite[key]

        return overflow(out, base, desc)

    def expected(self, msg: dict) -> dict:
        shape = msg.get("shape")
        refs = [self._share(self._reference(int(seed), shape, None)) for seed in msg["seeds"]]
        return self._answer(expected=refs)

    def work(self, msg: dict) -> dict:
        """``BENCH``'s flops/bytes of one call on the inputs of ``msg["seed"]``."""
        from .roofline import work_of

        result: dict = {}
        work = work_of(self.harness.bench, self._make(int(msg["seed"]), msg.get("shape")), result)
        return {"work": work, "warnings": result.get("warnings", [])}


def serve(chan: Channel, setup: dict) -> None:
    """Load the harness, then answer the judge until ``exit`` or the end of the channel."""
    me = _Referee(setup)
    first = me.load(setup["harness_source"], setup["source_name"], setup.get("project"))
    chan.send(first)
    if "error" in first:
        os._exit(0)
    handlers = {
        "cases": me.cases,
        "expected": me.expected,
        "work": me.work,
        "derived_plan": me.derived_plan,
        "derived": me.derived,
    }
    serve_requests(chan, handlers, _harness_error)


def _load_site(exc: BaseException, project: dict | None) -> tuple[str, int | None]:
    """``(" (at minikern/ops/rms_norm.py:17)", line)`` for the innermost frame of a user
    module (``<src:PATH>`` / ``<harness:PATH>``) in ``exc``'s traceback (for a syntax error,
    its own location); ``line`` only when that file is the kernel module. ``("", None)`` when
    no frame is the user's."""
    user = ("<src:", "<harness:")
    found: tuple[str, int] | None = None
    tb = exc.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code.co_filename.startswith(user):
            found = (tb.tb_frame.f_code.co_filename, tb.tb_lineno)
        tb = tb.tb_next
    if isinstance(exc, SyntaxError) and str(exc.filename or "").startswith(user) and exc.lineno:
        found = (str(exc.filename), int(exc.lineno))
    if found is None:
        return "", None
    path = found[0].split(":", 1)[1].rstrip(">")
    kernel = (project or {}).get("kernel_path")
    return f" (at {path}:{found[1]})", found[1] if kernel and path == kernel else None


def _shapes_problem(shapes) -> str | None:
    """Why ``BENCH["shapes"]`` is unusable, or None: it must be a non-empty list of dicts of
    ``get_inputs`` keyword arguments (string keys, JSON values)."""
    ok = (
        isinstance(shapes, (list, tuple))
        and shapes
        and all(isinstance(s, dict) and all(isinstance(k, str) for k in s) for s in shapes)
    )
    if ok:
        try:
            json.dumps(list(shapes))
            return None
        except (TypeError, ValueError):
            pass
    return (
        'BENCH["shapes"] must be a non-empty list of dicts of get_inputs keyword arguments, '
        'e.g. [{"M": 4096, "N": 4096}, ...] (numbers, strings, lists)'
    )


def _harness_error(exc: BaseException, msg: dict) -> dict:
    """A harness failure, named by the seed (and shape) it was asked for."""
    what = f"seed {msg['seeds'][0]}" if msg.get("seeds") else "its inputs"
    if msg.get("shape"):
        what += f", shape {shape_text(msg['shape'])}"
    return result_dict("runtime_error", f"the harness failed on {what}: {short(exc)}")


def main(chan_fds: tuple[int, ...], setup: dict) -> None:
    """The reference process's body after the fork (``setup``: ``harness_source``,
    ``source_name``, ``use_cuda``, ``dirs``, ``memory_limit_mb``, ``judge`` (its pid));
    never returns."""
    import signal

    from ..contestant.process import isolate
    from ..runtime.device import limit_address_space
    from ..sandbox.policy import close_unix_sockets

    try:
        fds = isolate(chan_fds, setup["dirs"], signal.SIGKILL, setup["judge"])
        close_unix_sockets(bool(setup["use_cuda"]))
        if not setup["use_cuda"]:
            limit_address_space(int(setup["memory_limit_mb"]) * 1024 * 1024)
        from ..contestant.autotune import prepare

        prepare(not setup["use_cuda"])  # a reference that calls an autotuned kernel
        serve(Channel(*fds), setup)
    finally:
        os._exit(1)
