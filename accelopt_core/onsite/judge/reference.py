"""The judge's end of the reference process (:mod:`.judge.referee`): the original file's
harness as data (issue 10), and the warm worker's store of its answers (issue 50, item 4:
:mod:`.runtime.casestore`)."""

from __future__ import annotations

from ..runtime import exchange
from .rules import segment_value, segments


def number(value) -> float | None:
    """``value`` as a float when it is an int or float (not a bool), else None."""
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


class Reference:
    """The judge's end of the reference process: the harness as data.

    Args:
        peer: the process handle (:class:`.judge.peers.Candidate`'s channel, deadline and exchange
            directory logic, reused).
        bench: the tolerances the process reported (``rtol``, ``atol``; absent: defaults).
        shapes: ``BENCH["shapes"]`` (``get_inputs`` keyword arguments per shape), or None.
            Every request is for :attr:`shape` (None: ``get_inputs``'s defaults).
        backward: ``BENCH["backward"]``: every call is forward + backward.
    """

    def __init__(
        self, peer, bench: dict, shapes: list[dict] | None = None, backward: bool = False
    ) -> None:
        self.peer = peer
        self.bench = {k: v for k, v in bench.items() if isinstance(v, float)}
        self.shapes = shapes
        self.shape: dict | None = None  # the shape every request is for (BENCH["shapes"])
        self.backward = backward  # BENCH["backward"]: calls are forward + backward
        self.grad_inputs: list[int] = []  # the inputs that require grad (backward)
        self.sizes: dict = {}  # the reference process's rebound sizes (runtime.sizes)
        #: Where the judge keeps a case's inputs and reference outputs and checks the
        #: candidate's (issue 50, item 3): the judge's device (``cuda`` on a GPU), so compare,
        #: the NaN/Inf count and the mutation check run there.
        self.device = "cpu"
        #: The warm worker's store of answers (issue 50, item 4; :meth:`keep_in`), or None.
        self.store = None
        self.identity = ""  # :func:`.runtime.casestore.identity` of this harness
        self.budget = 0  # the store's budget, bytes
        self.kept = {"reused": 0, "made": 0}  # answers taken from the store / asked for
        self.store_note: str | None = None  # why an answer was not kept (the first reason)

    def keep_in(self, store, identity: str, budget: int) -> None:
        """Take answers from, and offer them to, ``store`` (:class:`.runtime.casestore.
        CaseStore`) under the harness ``identity``, within ``budget`` bytes."""
        self.store, self.identity, self.budget = store, identity, budget

    def use_store(self, req: dict, use_cuda: bool) -> None:
        """:meth:`keep_in` the warm worker's store, when this process inherited one and the
        request's budget (``reference_store_mb``, :func:`.runtime.casestore.budget_bytes`)
        is not zero; the identity is that of the sources the reference process loads."""
        from ..protocol import JUDGE_VERSION
        from ..runtime import casestore
        from ..runtime.loading import project_of

        store = casestore.current()
        budget = casestore.budget_bytes(req.get("reference_store_mb"))
        if store is None or store.send_fd is None or budget <= 0:
            return
        setup = {
            "harness_source": req["harness_source"],
            "source_name": str(req.get("source_name") or "candidate.py"),
            "project": project_of(req),
        }
        self.keep_in(store, casestore.identity(setup, use_cuda, JUDGE_VERSION), budget)

    def store_metrics(self) -> dict | None:
        """``metrics["reference_store"]``: ``{"reused": n, "made": m[, "note": why]}`` (the
        answers this evaluation took from the warm worker's store, and those it asked the
        reference process for and offered), or None without a store."""
        if self.store is None:
            return None
        return {**self.kept, **({"note": self.store_note} if self.store_note else {})}

    def _kept(self, msg: dict, expect: str = "done") -> dict:
        """The answer to ``msg`` (for the current shape): the store's when it keeps one, else
        the reference process's, then offered to the store. Raises as ``peer.ask``."""
        from ..runtime import casestore

        msg = self._shaped(msg)
        key = casestore.key(self.identity, msg) if self.store is not None else None
        answer = self.store.get(key) if key else None
        if answer is not None:
            self.kept["reused"] += 1
        else:
            answer = self.peer.ask(msg, expect)
            if key:
                self.kept["made"] += 1
                why = self.store.offer(key, answer, self.budget)
                self.store_note = self.store_note or why
        return self._took(answer)

    def _took(self, answer: dict) -> dict:
        """``answer``, after keeping its ``grad_inputs`` (the inputs that require grad)."""
        grads = answer.get("grad_inputs")
        if isinstance(grads, list) and all(type(i) is int for i in grads):
            self.grad_inputs = grads
        return answer

    def _shaped(self, msg: dict) -> dict:
        """``msg`` for the current :attr:`shape` (unchanged without one)."""
        return msg if self.shape is None else {**msg, "shape": self.shape}

    def _ask(self, msg: dict) -> dict:
        return self._took(self.peer.ask(self._shaped(msg), "done"))

    @staticmethod
    def segments(answer: dict, key: str, count: int) -> list[exchange.Segment]:
        """:func:`.rules.segments`, named as the reference process's."""
        return segments(answer, key, count, "reference process: ")

    @staticmethod
    def value(segment: exchange.Segment, torch, device: str = "cpu", keep: bool = False):
        """:func:`.rules.segment_value`, named as the reference process's."""
        return segment_value(segment, torch, device, keep, "reference segment: ")

    def case(self, seed: int, torch) -> tuple[exchange.Segment, tuple, object]:
        """``(inputs segment, inputs, reference outputs)`` of ``seed``, both on
        :attr:`device`; the segment is left open for the candidate (the caller closes it).
        Raises Failure (the harness's runtime_error, or the process's death)."""
        self.peer.doing = f"making the inputs and reference of seed {seed} (get_inputs, reference)"
        answer = self._kept({"op": "cases", "seeds": [seed], "expected": True})
        (seg,) = self.segments(answer, "inputs", 1)
        (ref,) = self.segments(answer, "expected", 1)
        inputs = self.value(seg, torch, self.device, keep=True)
        return seg, tuple(inputs), self.value(ref, torch, self.device)

    def inputs(
        self, seeds: list[int], torch, device: str, kept: bool = False
    ) -> list[tuple[exchange.Segment, tuple]]:
        """``(segment, inputs on device)`` of each of ``seeds`` (kept by the process for
        :meth:`expected`); the segments are left open for the candidate. ``kept``: from the
        warm worker's store when it has them (the timing seed's; a fresh pool's never are)."""
        self.peer.doing = f"making the inputs of {len(seeds)} timing seeds (get_inputs)"
        msg = {"op": "cases", "seeds": list(seeds), "expected": False}
        answer = self._kept(msg) if kept else self._ask(msg)
        segs = self.segments(answer, "inputs", len(seeds))
        return [(seg, tuple(self.value(seg, torch, device, keep=True))) for seg in segs]

    def stage_inputs(self, seed: int, shapes: list) -> list[exchange.Segment] | None:
        """The inputs segment of ``seed`` at each of ``shapes`` (None: ``get_inputs``'s
        defaults) for the compile stage (issue 50, item 5), from the warm worker's store when
        it keeps them; None when the harness raises on one (the stage then makes them itself,
        and the checks report the harness's error where they did). Raises Failure when the
        reference process dies or hangs."""
        from ..runtime.failures import Failure

        segs: list[exchange.Segment] = []
        saved = self.shape
        try:
            for shape in shapes:
                self.shape = shape
                self.peer.doing = f"making the inputs of seed {seed} for the compile stage"
                answer = self._kept({"op": "cases", "seeds": [seed], "expected": False})
                segs += self.segments(answer, "inputs", 1)
        except Failure as failure:
            for seg in segs:
                seg.close()
            if failure.result.get("status") == "timeout" or self.peer._wait(0.05) is not None:
                raise
            return None
        finally:
            self.shape = saved
        return segs

    def expected(self, seeds: list[int], torch) -> list:
        """The reference outputs (on :attr:`device`) of inputs made earlier by :meth:`inputs`."""
        self.peer.doing = "computing the references of timed repetitions (reference)"
        answer = self._ask({"op": "expected", "seeds": list(seeds)})
        found = self.segments(answer, "expected", len(seeds))
        return [self.value(seg, torch, self.device) for seg in found]

    def derived_plan(self, seed: int, shape: dict | None) -> dict:
        """The derived inputs of ``seed``'s inputs (of ``BENCH["shapes"]`` entry ``shape``):
        ``{"derived": [descriptor, ...], "skipped": [{"name", "why"}, ...]}``, each entry
        checked (the process runs the user's code: its answer is data). Raises Failure (the
        harness's runtime_error, or the process's death)."""
        from .derived_checks import clean_plan

        self.peer.doing = f"deriving inputs from the inputs of seed {seed} (get_inputs)"
        msg = {"op": "derived_plan", "seed": seed, **({"shape": shape} if shape else {})}
        return clean_plan(self._unshaped(msg, "plan").get("plan"))

    def _unshaped(self, msg: dict, expect: str) -> dict:
        """:meth:`_kept` for a request that names its own shape (or none)."""
        shape, self.shape = self.shape, None
        try:
            return self._kept(msg, expect)
        finally:
            self.shape = shape

    def derived_case(self, seed: int, shape: dict | None, desc: dict, torch, kept: bool = True):
        """``(inputs segment, inputs, reference outputs)`` of the derived input ``desc`` of
        ``seed``'s inputs, as :meth:`case`. Raises :class:`.derived_checks.Unusable` when the
        derivation does not apply or the reference raises (or dies, or hangs) on it.
        ``kept``: from / into the warm worker's store (the search's examples are not)."""
        from ..runtime.failures import Failure
        from .derived_checks import Unusable

        self.peer.doing = f"making the derived input {desc.get('name')} (get_inputs, reference)"
        msg = {"op": "derived", "seed": seed, "derive": desc}
        if shape:
            msg["shape"] = shape
        try:
            answer = self._unshaped(msg, "done") if kept else self.peer.ask(msg, "done")
        except Failure as failure:
            why = str(failure.result.get("message"))[:300]
            raise Unusable(f"the reference cannot run on it: {why}") from None
        if answer.get("skip"):
            raise Unusable(str(answer["skip"])[:300])
        (seg,) = self.segments(answer, "inputs", 1)
        (ref,) = self.segments(answer, "expected", 1)
        inputs = self.value(seg, torch, self.device, keep=True)
        return seg, tuple(inputs), self.value(ref, torch, self.device)

    @staticmethod
    def discard(segment: exchange.Segment) -> None:
        """Close a segment the caller was left (by :meth:`case` or :meth:`derived_case`)."""
        segment.close()

    def work(self, seed: int) -> tuple[dict[str, float], list[str]]:
        """``({"flops", "bytes"}, warnings)`` of one call on the inputs of ``seed``."""
        self.peer.doing = 'computing BENCH["flops"] / BENCH["bytes"]'
        answer = self._kept({"op": "work", "seed": seed}, "work")
        work = answer.get("work") if isinstance(answer.get("work"), dict) else {}
        clean = {
            k: float(v)
            for k, v in work.items()
            if k in ("flops", "bytes") and number(v) is not None
        }
        notes = [str(w)[:300] for w in answer.get("warnings") or [] if isinstance(w, str)]
        return clean, notes[:5]
