"""Code lenses above each kernel: its last profile or a running search's status, and the
Profile / Optimize / Cancel / Show Memory / Show Search commands. The client is asked to refresh them
(throttled) whenever what they show changes.

Every lens carries a registered command (Neovim's ``vim.lsp.codelens.run()`` runs the one on
the line; an empty command is an error there): a label runs

* ``accelopt.showStatus [uri, kernelName]`` -> ``{kernel, message, job?, profile?,
  improvements}`` (also shown as ``window/showMessage``).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from lsprotocol import types

from accelopt_core.textdiff import split_lines

from .. import device_present, present
from ..edits import to_lsp_position
from .base import LanguageFeature, command_args, harness_gap, refusal, runnable
from .harness_documents import HarnessDocumentsFeature
from .harnesses import HarnessFeature
from .results import ResultsFeature

if TYPE_CHECKING:
    from accelopt_core.kernelfile import KernelFile, KernelInfo
    from accelopt_core.onsite.protocol import EvalResult

    from ..documents import DocState, KernelDocument


class CodeLensFeature(LanguageFeature):
    """``textDocument/codeLens``."""

    async def document_open(self, doc: KernelDocument) -> None:
        self.ctx.refresh_lenses()

    async def document_save(self, doc: KernelDocument) -> None:
        self.ctx.refresh_lenses()

    async def code_lenses(self, uri: str) -> list[types.CodeLens] | None:
        """The lenses of every kernel of the document (None when it has no kernels)."""
        doc, kf = await self.ctx.docs.parsed(uri)
        if doc is not None and kf is None:
            return await self.ctx.feature(HarnessDocumentsFeature).harness_lenses(uri, doc)
        if doc is None or kf is None:
            return None
        st = self.ctx.docs.state(uri)
        lines = split_lines(kf.source)
        lenses: list[types.CodeLens] = []
        for kernel in kf.kernels:
            start = to_lsp_position(lines, doc.position_codec, kernel.range.start_line - 1, 0)
            rng = types.Range(start=start, end=start)
            for title, command, args, *tip in await self._kernel_lenses(uri, kf, st, kernel):
                cmd = types.Command(
                    title=title, command=command, arguments=args, tooltip=tip[0] if tip else None
                )
                lenses.append(types.CodeLens(range=rng, command=cmd))
        return lenses

    async def _kernel_lenses(
        self, uri: str, kf: KernelFile, st: DocState, kernel: KernelInfo
    ) -> list[tuple[Any, ...]]:
        """(title, command, arguments[, tooltip]) of one kernel's lenses. Every lens runs a
        registered command (Neovim runs whichever lens is on the line): a label shows the
        kernel's status (``accelopt.showStatus``)."""
        status = ("accelopt.showStatus", [uri, kernel.name])
        job = self.ctx.jobs.active_job(uri, kernel.name)
        if job is not None:
            return [
                (f"AccelOpt: {job.status_line()}", *status),
                ("Show Search", "accelopt.showSearch", [uri, kernel.name]),
                ("Cancel", "accelopt.cancel", [job.id]),
            ]
        several = self.ctx.feature(HarnessFeature).candidates(kf.path)
        if not runnable(kf) and len(several) > 1:
            title = f"AccelOpt: {len(several)} harness files measure this module · pick one"
            return [(title, "accelopt.pickHarness", [uri])]
        if not runnable(kf):
            # it names the kernel so editors can find it (Show Memory works without a harness)
            return [
                (f"AccelOpt: {harness_gap(kf)} · memory", "accelopt.showMemory", [uri, kernel.name])
            ]
        if kf.entry_for(kernel.name) is None:  # a device helper, or a kernel another harness times
            entry = kf.harness.entry if kf.harness else None
            title = (
                f"AccelOpt: not launched by the harness entry {entry} (a device helper, or a "
                "kernel another harness measures) · no figure"
            )
            return [(title, *status)]
        out: list[tuple[Any, ...]] = []
        entry = st.profiles.get(kernel.name)
        if st.profiling:
            out.append(("AccelOpt: profiling…", *status))
        elif entry is not None:
            out += _profile_lenses(entry.result, kernel.name, uri, status)
        else:
            out.append(("Profile", "accelopt.profile", [uri, kernel.name]))
        offered = await self.ctx.feature(ResultsFeature).offered_candidates(uri, kf, kernel.name)
        if offered:
            best = offered[0].speedup or 1.0
            title = f"{len(offered)} improvement(s), best {best:.2f}x (code actions)"
            out.append((title, *status))
        if kernel.name in st.reports:  # issue 32: the last search as a picture
            out.append(("Show Search", "accelopt.showSearch", [uri, kernel.name]))
        out.append(("Optimize", "accelopt.optimize", [uri, kernel.name]))
        bound = kf.context.harness_file if kf.context is not None else None
        if bound is not None and len(several) > 1:
            out.append((f"harness {os.path.basename(bound)}", "accelopt.pickHarness", [uri]))
        return out

    async def cmd_show_status(self, *args: Any) -> dict[str, Any]:
        """``accelopt.showStatus [uri, kernelName]``: what the kernel's lenses say, in full (a
        running search, the last profile with its whole message, the improvements offered),
        shown as ``window/showMessage`` and returned as ``{kernel, message, job?, profile?,
        improvements}``."""
        uri, name = command_args("accelopt.showStatus", args, ["uri", "kernelName"])
        doc, kf = await self.ctx.docs.parsed(uri)
        problem = refusal(uri, doc, kf, name)
        if problem is not None:
            return {"kernel": name, "message": problem, "improvements": 0}
        st = self.ctx.docs.state(uri)
        job = self.ctx.jobs.active_job(uri, name)
        entry = st.profiles.get(name)
        offered = await self.ctx.feature(ResultsFeature).offered_candidates(uri, kf, name)
        parts = [f"search {job.id}: {job.status_line()}"] if job is not None else []
        if st.profiling:
            parts.append("profiling…")
        elif entry is not None:
            parts.append(f"last profile: {entry.result.summary()}")
        if offered:
            parts.append(f"{len(offered)} improvement(s) offered as code actions")
        message = f"AccelOpt · {name}: " + ("; ".join(parts) or "not profiled yet")
        self.ctx.show(types.MessageType.Info, message)
        out: dict[str, Any] = {"kernel": name, "message": message, "improvements": len(offered)}
        if job is not None:
            out["job"] = job.to_dict()
        if entry is not None:
            out["profile"] = {**entry.result.to_dict(), "version": entry.version}
        return out


def _profile_lenses(
    result: EvalResult, kernel: str, uri: str, status: tuple[str, list[Any]]
) -> list[tuple[Any, ...]]:
    """The last profile's lenses: its summary (runs ``accelopt.profile``; the tooltip says
    which shapes it was checked on, or why it was not timed) and, when the profile compiled
    the kernel for the GPU (issue 21), ``AccelOpt · sm_90: 44 regs · occupancy 50%
    (registers)`` (runs ``accelopt.showStatus``; the tooltip lists every compiled launch)."""
    out: list[tuple[Any, ...]] = [
        (
            present.lens_summary(result),
            "accelopt.profile",
            [uri, kernel],
            device_present.profile_tooltip(result),
        )
    ]
    device = device_present.device_lens(result, kernel)
    if device is not None:
        out.append((device[0], *status, device[1]))
    return out
