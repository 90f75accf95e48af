"""The Target protocol: where candidates are evaluated.

A target takes an :class:`~accelopt_core.onsite.protocol.EvalRequest`, runs the self-contained
worker (``accelopt_core.onsite``, shipped by :mod:`accelopt_core.targets.shipping`) where the
hardware is, and returns an :class:`~accelopt_core.onsite.protocol.EvalResult`.
Implementations: ``local`` (subprocesses here), ``ssh`` (a remote machine over asyncssh) and
``ray`` (tasks on a Ray cluster); local and ssh share :class:`~.pool.DevicePool`. The search
only sees this protocol.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol, runtime_checkable

from accelopt_core.onsite.protocol import EvalRequest, EvalResult


class TargetError(Exception):
    """A target cannot be used at all (bad URL, unknown host key, missing Ray, ...).

    A failure of one evaluation is never raised: it is an EvalResult with a failure status.
    """


@runtime_checkable
class Target(Protocol):
    """Where evaluations run.

    Attributes:
        name: the target spec as configured (``local``, ``ssh://gpu-box``, ``ray://head:10001``).
        fingerprint: stable identity of the hardware and software behind the target, part of the
            evaluation-cache key (e.g. ``local:cpu:torch-2.13.0:triton-3.9.0``), with
            :func:`nki_tag` of the target's NKI stack where it has a Neuron SDK.
        capacity: evaluations that may run at once (devices, or configured CPU slots).
    """

    name: str

    @property
    def fingerprint(self) -> str: ...

    @property
    def capacity(self) -> int: ...

    async def evaluate(self, request: EvalRequest) -> EvalResult:
        """Evaluate one candidate. Never raises for a bad candidate (returns a failure
        status); cancelling the awaiting task stops the evaluation and frees its slot."""
        ...

    async def close(self) -> None:
        """Release connections and processes. Idempotent."""
        ...


def nki_tag(stack: Mapping[str, Any] | None) -> str:
    """The part of a target fingerprint that decides how NKI candidates run there, from the
    target's NKI stack as its worker or agent reports it before any evaluation
    (:func:`accelopt_core.onsite.runtime.stacks.stack`: ``nki`` or ``neuronxcc`` version,
    ``nki_api``, ``nki_mode``, ``neuron_platform``, ``lnc``).

    ``:nki-0.7.0:nki-device:trn2:lnc-2`` (``neuronxcc-2.21...`` for the legacy API;
    ``nki-simulated`` for ``nki.simulate`` on CPU, whose results carry no Trainium timing);
    ``""`` without an SDK, so targets without one keep their fingerprint. A stack without a
    mode (an older worker) says ``nki-mode-unknown``: it never matches a probed one."""
    if not stack or not stack.get("nki_api"):
        return ""
    key = "nki" if stack["nki_api"] == "nki" else "neuronxcc"
    mode = stack.get("nki_mode") or "mode-unknown"
    parts = [f"{key}-{stack.get(key) or 'unknown'}", f"nki-{mode}"]
    if stack.get("neuron_platform"):
        parts.append(str(stack["neuron_platform"]))
    if stack.get("lnc"):
        parts.append(f"lnc-{stack['lnc']}")
    return ":" + ":".join(parts)
