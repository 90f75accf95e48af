"""The judge's rejections (status ``rejected``, field ``rule``) and the exchange-file clean-up,
shared by the judge's peers (:mod:`.peers`), the reference process (:mod:`.judge.referee`) and the
timing checks (:mod:`.contestant.timing`)."""

from __future__ import annotations

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


def segments(answer: dict, key: str, count: int, who: str = "") -> list[exchange.Segment]:
    """The ``count`` segments a peer sent under ``answer[key]`` (one segment counts as a list
    of one). ``who`` prefixes the message. Raises Failure (protocol violation) when they are
    not there."""
    got = answer.get(key)
    got = [got] if isinstance(got, exchange.Segment) else got
    if not isinstance(got, list) or len(got) != count:
        raise protocol_violation(f"{who}expected {count} segments in {key!r}")
    if not all(isinstance(g, exchange.Segment) for g in got):
        raise protocol_violation(f"{who}{key!r} holds no segment")
    return got


def segment_value(segment, torch, device: str = "cpu", keep: bool = False, who: str = ""):
    """The value of a segment a peer sent, on ``device``; its descriptor is closed unless
    ``keep`` (to forward the segment to the candidate). ``who`` prefixes the message. Raises
    Failure (protocol violation) when it is no segment or cannot be mapped."""
    try:
        if not isinstance(segment, exchange.Segment):
            raise protocol_violation(f"{who}expected a segment")
        return segment.value(torch, device)
    except exchange.ExchangeError as exc:
        raise protocol_violation(f"{who}{exc}") from None
    finally:
        if not keep and isinstance(segment, exchange.Segment):
            segment.close()


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
