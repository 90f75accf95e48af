"""Facts about a compiled kernel from NVIDIA's tools that the Triton wheel ships in
``triton/backends/nvidia/bin`` (issue 21): ``cuobjdump --dump-resource-usage`` (registers,
stack, static shared and local memory per thread of each function in the cubin), ``ptxas -v``
run on the kernel's PTX with Triton's own flags (spill stores and loads, bytes) and
``cuobjdump -sass`` (the SASS text, read by :mod:`.sass`). The three run concurrently. The
compile stage reads SASS from ``nvdisasm`` over the kernels' machine code instead (one run for
all of them, :func:`disassemble`), started before the compiles (:class:`EarlyDisassembly`).

Standard library only at module level (triton is imported inside :func:`ptxas_path`).
"""

from __future__ import annotations

import os
import re
import subprocess
import tempfile

#: Longest wait for one tool, s.
TOOL_TIMEOUT_S = 60.0


class ToolError(RuntimeError):
    """A tool of the wheel is missing or failed (message: the tool and its stderr)."""


def tool_dir() -> str:
    """``triton/backends/nvidia/bin`` of the installed triton (found without importing it).

    Raises:
        ToolError: triton is not installed.
    """
    import importlib.util

    spec = importlib.util.find_spec("triton")
    if spec is None or not spec.submodule_search_locations:
        raise ToolError("triton is not installed")
    return os.path.join(list(spec.submodule_search_locations)[0], "backends", "nvidia", "bin")


def ptxas_path(capability: int) -> str:
    """The ptxas Triton itself uses for ``capability`` (``ptxas-blackwell`` for sm_90a and
    sm_100a in Triton 3.9, else ``ptxas``; ``TRITON_PTXAS_PATH`` respected)."""
    from triton.backends.nvidia.compiler import get_ptxas

    return get_ptxas(capability).path


_USAGE = re.compile(r"Function (\S+):\s*\n\s*REG:(\d+) STACK:(\d+) SHARED:(\d+) LOCAL:(\d+)")
_PTXAS_FN = re.compile(
    r"Function properties for (\S+)\s*\n\s*(\d+) bytes stack frame, "
    r"(\d+) bytes spill stores, (\d+) bytes spill loads"
)
_PTXAS_REGS = re.compile(r"Compiling entry function '(\S+)'.*?Used (\d+) registers", re.S)


def parse_resource_usage(text: str) -> dict[str, dict]:
    """``cuobjdump --dump-resource-usage`` output -> ``{function: {"registers", "stack",
    "shared", "local"}}`` (registers per thread; stack, static shared and local bytes)."""
    return {
        m.group(1): {
            "registers": int(m.group(2)),
            "stack": int(m.group(3)),
            "shared": int(m.group(4)),
            "local": int(m.group(5)),
        }
        for m in _USAGE.finditer(text)
    }


def parse_ptxas(text: str) -> dict[str, dict]:
    """``ptxas -v`` output -> ``{function: {"registers", "stack", "spill_stores",
    "spill_loads"}}`` (registers per thread; stack frame and spill bytes)."""
    out: dict[str, dict] = {}
    for m in _PTXAS_FN.finditer(text):
        out[m.group(1)] = {
            "stack": int(m.group(2)),
            "spill_stores": int(m.group(3)),
            "spill_loads": int(m.group(4)),
        }
    for m in _PTXAS_REGS.finditer(text):
        out.setdefault(m.group(1), {})["registers"] = int(m.group(2))
    return out


def arch_suffix(capability: int) -> str:
    """``"a"`` for an architecture Triton compiles with its architecture-specific features
    (``capability`` >= 90: ``sm_90a``, ``sm_100a``; Triton 3.9's ``make_cubin``), else ``""``."""
    return "a" if capability >= 90 else ""


def ptxas_argv(ptxas: str, capability: int, fp_fusion: bool, src: str, dst: str) -> list[str]:
    """The ptxas command line Triton 3.9 runs (``make_cubin``: ``-lineinfo``, ``--fmad=false``
    without FP fusion, ``-v``, ``--regAllocOptLevel=2``, ``--gpu-name=sm_90a``)."""
    fmad = [] if fp_fusion else ["--fmad=false"]
    return [
        ptxas,
        "-lineinfo",
        *fmad,
        "-v",
        "--regAllocOptLevel=2",
        f"--gpu-name=sm_{capability}{arch_suffix(capability)}",
        src,
        "-o",
        dst,
    ]


def _start(argv: list[str]) -> subprocess.Popen:
    try:
        return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    except OSError as exc:
        raise ToolError(f"{os.path.basename(argv[0])}: {exc}") from None


def _finish(proc: subprocess.Popen, name: str) -> str:
    try:
        out, err = proc.communicate(timeout=TOOL_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        raise ToolError(f"{name} took over {TOOL_TIMEOUT_S:.0f} s") from None
    if proc.returncode != 0:
        raise ToolError(f"{name} failed ({proc.returncode}): {err.strip()[-400:]}")
    return out + err


def inspect(
    cubin: bytes, ptx: str, capability: int, fp_fusion: bool = True, sass: bool = True
) -> dict:
    """Run the wheel's tools on one kernel's ``cubin`` and ``ptx`` (concurrently).

    Returns ``{"usage": parse_resource_usage(...), "ptxas": parse_ptxas(...), "sass": SASS
    text or ""}``.

    Raises:
        ToolError: a tool is missing, fails or times out.
    """
    bindir = tool_dir()
    cuobjdump = os.path.join(bindir, "cuobjdump")
    with tempfile.TemporaryDirectory(prefix="accelopt-cubin-") as tmp:
        cub, src = os.path.join(tmp, "k.cubin"), os.path.join(tmp, "k.ptx")
        with open(cub, "wb") as f:
            f.write(cubin)
        with open(src, "w") as f:
            f.write(ptx)
        argv = ptxas_argv(ptxas_path(capability), capability, fp_fusion, src, src + ".o")
        procs = {
            "cuobjdump --dump-resource-usage": _start([cuobjdump, "--dump-resource-usage", cub]),
            "ptxas -v": _start(argv),
        }
        if sass:
            procs["cuobjdump -sass"] = _start([cuobjdump, "-sass", cub])
        texts = {name: _finish(proc, name) for name, proc in procs.items()}
    return {
        "usage": parse_resource_usage(texts["cuobjdump --dump-resource-usage"]),
        "ptxas": parse_ptxas(texts["ptxas -v"]),
        "sass": texts.get("cuobjdump -sass", ""),
    }


def text_sections(cubin: bytes) -> dict[str, bytes]:
    """``{function: machine code}`` of a cubin (ELF64, little-endian): its ``.text.<function>``
    sections.

    Raises:
        ToolError: ``cubin`` is not a 64-bit little-endian ELF file.
    """
    import struct

    if cubin[:6] != b"\x7fELF\x02\x01":
        raise ToolError("not a 64-bit little-endian ELF cubin")
    shoff = struct.unpack_from("<Q", cubin, 0x28)[0]
    entsize, count, names_index = struct.unpack_from("<HHH", cubin, 0x3A)
    # Elf64_Shdr: sh_name, sh_type, sh_flags, sh_addr, sh_offset, sh_size, ...
    headers = [struct.unpack_from("<IIQQQQ", cubin, shoff + i * entsize) for i in range(count)]
    names_at = headers[names_index][4]
    out = {}
    for name_off, _, _, _, offset, size in headers:
        start = names_at + name_off
        name = cubin[start : cubin.index(b"\0", start)].decode("ascii", "replace")
        if name.startswith(".text."):
            out[name[len(".text.") :]] = cubin[offset : offset + size]
    return out


_ADDRESS = re.compile(r"/\*([0-9a-f]{4,})\*/")


def _nvdisasm_argv(capability: int, path: str) -> list[str]:
    arch = f"SM{capability}{arch_suffix(capability)}"
    return [os.path.join(tool_dir(), "nvdisasm"), "-b", arch, path]


def _concatenate(codes: dict) -> tuple[list[tuple], bytes]:
    """``(spans, blob)``: the machine codes of ``codes`` one after another, and each key's
    ``(key, start, end)`` byte range in the blob."""
    spans, blob = [], b""
    for key, code in codes.items():
        spans.append((key, len(blob), len(blob) + len(code)))
        blob += code
    return spans, blob


def _split(text: str, spans: list[tuple]) -> tuple[dict, int]:
    """``({key: SASS text}, highest instruction address)`` of one nvdisasm output over the
    blob of ``spans`` (-1 when no instruction was found)."""
    out: dict = {key: [] for key, _, _ in spans}
    highest = -1
    for line in text.splitlines():
        m = _ADDRESS.search(line)
        if m is None:
            continue
        at = int(m.group(1), 16)
        highest = max(highest, at)
        for key, start, end in spans:
            if start <= at < end:
                out[key].append(line)
                break
    return {key: "\n".join(lines) for key, lines in out.items()}, highest


def disassemble(codes: dict, capability: int) -> dict:
    """SASS text of each machine code in ``codes`` (key -> bytes, all for ``capability``), from
    ONE ``nvdisasm -b SM<cc>[a]`` run over their concatenation (each run of the disassembler
    costs ≈0.35 s of CPU before it reads anything), split by instruction address.

    Raises:
        ToolError: nvdisasm is missing, fails or times out.
    """
    spans, blob = _concatenate(codes)
    if not blob:
        return {key: "" for key in codes}
    with tempfile.TemporaryDirectory(prefix="accelopt-sass-") as tmp:
        path = os.path.join(tmp, "code.bin")
        with open(path, "wb") as f:
            f.write(blob)
        text = _finish(_start(_nvdisasm_argv(capability, path)), "nvdisasm")
    return _split(text, spans)[0]


#: What the early disassembler's input holds until the real code is there: 16 zero bytes, an
#: illegal instruction for nvdisasm on every SASS architecture (it exits with an error).
_PLACEHOLDER = bytes(16)


class EarlyDisassembly:
    """``nvdisasm`` started before the machine code it will disassemble exists, so that its
    start-up (0.4-0.5 s of CPU decoding its tables, the compile stage's longest tool) overlaps
    the compiles (issue 33: softmax's cold compile stage in at most 1 s).

    nvdisasm 13.1 (Triton 3.9's wheel) opens its input once to read its first 16 bytes,
    decodes its tables, then opens the file again BY PATH and reads it whole (checked with
    strace; undocumented). The constructor starts it on a file holding :data:`_PLACEHOLDER`;
    :meth:`finish` renames the concatenated code over that path (atomic: nvdisasm reads either
    the placeholder or all of the code) and waits. When nvdisasm read the placeholder (it was
    faster than the compiles, or another nvdisasm reads its input once), it fails or its output
    does not reach the end of the code, and :meth:`finish` runs :func:`disassemble` instead:
    the answer is always a plain run's. Code no longer than the placeholder always gets the
    plain run.

    Args:
        capability: the architecture of every code :meth:`finish` gets (90 = sm_90a).
    """

    def __init__(self, capability: int) -> None:
        self.capability = capability
        #: True when the early run did not see the code and :func:`disassemble` ran instead.
        self.reran = False
        self._proc: subprocess.Popen | None = None
        self._tmp: tempfile.TemporaryDirectory | None = None
        try:
            self._tmp = tempfile.TemporaryDirectory(prefix="accelopt-sass-")
            self._path = os.path.join(self._tmp.name, "code.bin")
            with open(self._path, "wb") as f:
                f.write(_PLACEHOLDER)
            self._proc = _start(_nvdisasm_argv(capability, self._path))
        except (OSError, ToolError):  # no early run: finish() runs the plain one
            self.cancel()

    def finish(self, codes: dict) -> dict:
        """:func:`disassemble` ``(codes, capability)``, from the early run when it read them.

        Raises:
            ToolError: nvdisasm is missing, fails or times out (on the plain run).
        """
        spans, blob = _concatenate(codes)
        proc = self._proc
        if len(blob) <= len(_PLACEHOLDER) or proc is None or self._tmp is None:
            self.cancel()
            return disassemble(codes, self.capability)
        with open(self._path + ".new", "wb") as f:
            f.write(blob)
        os.replace(self._path + ".new", self._path)
        try:
            text = _finish(proc, "nvdisasm")
        except ToolError:
            text = ""
        finally:
            self._proc = None
            self.cancel()
        found, highest = _split(text, spans)
        if highest < len(blob) - 16:  # the placeholder's failure, or an output cut short
            # (the last instruction starts 16 bytes before the end: sm_70 and later)
            self.reran = True
            return disassemble(codes, self.capability)
        return found

    def cancel(self) -> None:
        """Kill the early run (if it still runs) and remove its file. Idempotent."""
        proc, self._proc = self._proc, None
        if proc is not None:
            proc.kill()
            proc.communicate()
        tmp, self._tmp = self._tmp, None
        if tmp is not None:
            tmp.cleanup()
