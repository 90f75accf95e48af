"""SASS facts a kernel engineer reads, counted in ``cuobjdump -sass`` text (issue 21, item 3).

Static instruction counts (instructions in the code, not executed ones):

- ``tensor_core``: tensor-core instructions (HMMA/IMMA on sm_80, HGMMA/IGMMA/QGMMA — the
  WGMMA family — on sm_90, the tcgen05 ``UTC*MMA`` on sm_100; DMMA for FP64), and
  ``tensor_core_op`` the most frequent of their opcodes (None without any);
- ``ldg128``: 128-bit global loads (``LDG.E.128`` and variants), ``ldg_narrow``: narrower
  ``LDG`` (32/64-bit, 8/16-bit);
- ``ldgsts``: ``LDGSTS`` (cp.async, global → shared without registers, sm_80+);
- ``tma``: ``UTMALDG`` (TMA tensor loads, sm_90+);
- ``stl`` / ``ldl``: local-memory stores and loads (spills and stack arrays).

Standard library only.
"""

from __future__ import annotations

import re
from collections import Counter

#: One SASS instruction line: ``/*0bc0*/  @!P0 HGMMA.64x64x16.F32 R24, ...``.
_INSN = re.compile(r"^\s*/\*[0-9a-f]+\*/\s+(?:@!?U?P[0-7T]\s+)?([A-Z][A-Za-z0-9_.]*)", re.M)

_TENSOR = re.compile(r"^(HMMA|IMMA|BMMA|DMMA|HGMMA|IGMMA|QGMMA|BGMMA|UTC\w*MMA)$")

#: The keys of :func:`facts`, in order.
KEYS = ("tensor_core", "tensor_core_op", "ldg128", "ldg_narrow", "ldgsts", "tma", "stl", "ldl")


def opcodes(text: str) -> list[str]:
    """The opcodes (with modifiers, ``LDG.E.128``) of every instruction in SASS ``text``."""
    return _INSN.findall(text)


def facts(text: str) -> dict:
    """Counts of :data:`KEYS` in SASS ``text`` (``tensor_core_op`` a base opcode or None)."""
    counts = {key: 0 for key in KEYS[2:]}
    tensor_ops: Counter[str] = Counter()
    for op in opcodes(text):
        base, *mods = op.split(".")
        if _TENSOR.match(base):
            tensor_ops[base] += 1
        elif base == "LDG":
            counts["ldg128" if "128" in mods else "ldg_narrow"] += 1
        elif base == "LDGSTS":
            counts["ldgsts"] += 1
        elif base == "UTMALDG":
            counts["tma"] += 1
        elif base in ("STL", "LDL"):
            counts[base.lower()] += 1
    out: dict = {"tensor_core": sum(tensor_ops.values())}
    out["tensor_core_op"] = tensor_ops.most_common(1)[0][0] if tensor_ops else None
    out.update(counts)
    return {key: out[key] for key in KEYS}
