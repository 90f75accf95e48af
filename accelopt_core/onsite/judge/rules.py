"""The judge's rejections (status ``rejected``, field ``rule``) and the exchange-file clean-up,
shared by the judge's peers (:mod:`.peers`), the reference process (:mod:`.judge.referee`) and the
timing checks (:mod:`.contestant.timing`)."""

from __future__ import annotations

import os

from ..protocol import result_dict
from ..runtime import exchange
from ..runtime.failures import Failure

#: Rules of the judge (status ``rejected``, field ``rule``).
NO_LAUNCH_RULE = "no kernel launch"
PLAIN_RULE = "output not a plain tensor"
#: Rule of a candidate process that answers something else than what the judge asked.
PROTOCOL_RULE = "protocol violation"


def protocol_violation(detail: str) -> Failure:
    """A ``rejected`` Failure with rule ``protocol violation``."""
    return Failure(
        result_dict(
            "rejected",
            f"the candidate process broke the judge's protocol: {detail[:300]}",
            rule=PROTOCOL_RULE,
        )
    )


def discard(path: str) -> None:
    """Remove an exchange file (errors ignored)."""
    try:
        os.unlink(path)
    except OSError:
        pass


def rejected(rule: str, message: str) -> Failure:
    """A ``rejected`` Failure with its rule."""
    return Failure(result_dict("rejected", message, rule=rule))


def no_launch(launches, where: str) -> None:
    """Raise the ``no kernel launch`` rejection unless ``launches`` is an int >= 1."""
    if type(launches) is not int or launches < 1:
        raise rejected(
            NO_LAUNCH_RULE,
            f"no kernel launch: the entry launched no @triton.jit kernel of the candidate on "
            f"{where} (it must compute in its kernels)",
        )


def plain_outputs(out, where: str) -> None:
    """Raise the ``output not a plain tensor`` rejection when an output leaf was of another
    type than ``torch.Tensor`` / ``numpy.ndarray`` / a plain scalar in the candidate process."""
    found = exchange.foreign(out)
    if found is not None:
        position, name = found
        raise rejected(
            PLAIN_RULE,
            f"output not a plain tensor: output{position} on {where} is a '{name}', not "
            "exactly a torch.Tensor or numpy.ndarray (no subclasses or proxies)",
        )
