"""Code actions on a kernel: apply a verified improvement, create a benchmark harness (a new
file next to the module, or appended where the client cannot create files), pick one of several
harness files, start or cancel a search.

Improvements are ``refactor.rewrite`` actions, ranked, at most ``maxCodeActions`` per kernel,
tagged LLM-generated where the client knows the tag. Their edit is computed when the client
resolves the action (``codeAction/resolve``), against the document version they were offered
for, and carried over the user's later edits elsewhere in the file
(:func:`accelopt_server.edits.rebase`); clients without resolve get a command instead:

* ``accelopt.applyCandidate [uri, kernelName, candidateId, version]`` -> ``{applied, message?}``
  (the edit goes out as ``workspace/applyEdit``).
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from lsprotocol import types
from pygls.exceptions import JsonRpcContentModified, JsonRpcInvalidParams

from .. import present
from ..diagnostics import NO_HARNESS
from ..edits import from_lsp_position, source_lines
from ..harnesses import harness_file_name
from .base import LanguageFeature, command_args, runnable
from .harnesses import HarnessFeature
from .results import ResultsFeature
from .workspace_edits import WorkspaceEdits

if TYPE_CHECKING:
    from pygls.workspace import TextDocument

    from accelopt_core.kernelfile import KernelFile, KernelInfo

    from ..context import ServerContext

log = logging.getLogger("accelopt.server")


@dataclass(frozen=True)
class _ClientSupport:
    """What the client's code-action capabilities allow."""

    literal: bool  # CodeAction objects (else only Commands)
    resolve: bool  # edits filled in by codeAction/resolve (with action data)
    llm_tag: bool  # the LLM-generated tag
    preview: bool  # change annotations that need confirmation (VS Code: the refactor preview)


class CodeActionsFeature(LanguageFeature):
    """``textDocument/codeAction``, ``codeAction/resolve`` and ``accelopt.applyCandidate``."""

    def __init__(self, ctx: ServerContext) -> None:
        super().__init__(ctx)
        self.edits = WorkspaceEdits(ctx)

    async def code_actions(
        self, params: types.CodeActionParams
    ) -> list[types.CodeAction | types.Command] | None:
        """The actions for the kernels the range touches (filtered by ``context.only``)."""
        uri = params.text_document.uri
        doc, kf = await self.ctx.docs.parsed(uri)
        if doc is None or kf is None or not kf.kernels:
            return None
        kernels = _kernels_in(doc, kf, params.range)
        if not kernels:
            return None
        support = self._client_support()
        actions: list[types.CodeAction] = []
        several = self.ctx.feature(HarnessFeature).candidates(kf.path)
        for kernel in kernels:
            if kf.harness is None and len(several) > 1:
                actions.append(_pick_action(uri, kf, len(several)))
            if kf.harness is None:
                actions.append(self._harness_action(uri, doc, kf, kernel, params.context, support))
            actions.extend(await self._candidate_actions(uri, doc, kf, kernel, support))
            if runnable(kf):
                actions.append(self._search_action(uri, kernel))
        only = list(params.context.only or [])
        if only:
            actions = [a for a in actions if any(str(a.kind).startswith(str(o)) for o in only)]
        if not support.literal:
            return [a.command for a in actions if a.command is not None] or None
        return actions or None

    def _client_support(self) -> _ClientSupport:
        cap = self.ctx.capability
        properties = cap("text_document.code_action.resolve_support.properties", []) or []
        tags = list(cap("text_document.code_action.tag_support.value_set", []) or [])
        return _ClientSupport(
            literal=cap("text_document.code_action.code_action_literal_support") is not None,
            resolve="edit" in properties
            and bool(cap("text_document.code_action.data_support", False)),
            llm_tag=types.CodeActionTag.LlmGenerated in tags or 1 in tags,
            preview=bool(cap("workspace.workspace_edit.change_annotation_support", None))
            and bool(cap("workspace.workspace_edit.document_changes", False)),
        )

    def _harness_action(
        self,
        uri: str,
        doc: TextDocument,
        kf: KernelFile,
        kernel: KernelInfo,
        context: types.CodeActionContext,
        support: _ClientSupport,
    ) -> types.CodeAction:
        """Quick fix for the no-harness note: a harness skeleton for the kernel, in a new
        file next to the module where the client can create files, else appended."""
        diags = [d for d in context.diagnostics if d.code == NO_HARNESS]
        title = f"AccelOpt: insert a benchmark harness for {kernel.name}"
        if self.edits.can_create_files():
            name = os.path.basename(harness_file_name(kf.path))
            title = f"AccelOpt: create {name}, a benchmark harness for {kernel.name}"
        action = types.CodeAction(
            title=title,
            kind=types.CodeActionKind.QuickFix,
            diagnostics=diags or None,
            data={"type": "harness", "uri": uri, "kernel": kernel.name, "version": doc.version},
        )
        if not support.resolve:
            action.edit = self.edits.harness(doc, kf, kernel.name)
            action.data = None
        return action

    async def _candidate_actions(
        self,
        uri: str,
        doc: TextDocument,
        kf: KernelFile,
        kernel: KernelInfo,
        support: _ClientSupport,
    ) -> list[types.CodeAction]:
        """One rewrite per offered improvement of the kernel, best first (applied ones are
        retired); the best is preferred (one keystroke applies it). Where the client can
        confirm annotated edits, each rewrite also comes as a preview: the same edit marked
        ``needsConfirmation``, which VS Code opens in its refactor preview (the diff, then
        Apply or Discard)."""
        results = self.ctx.feature(ResultsFeature)
        report = results.offered(uri, kf, kernel.name)
        candidates = await results.offered_candidates(uri, kf, kernel.name)
        if report is None or not candidates:
            return []
        tags = (
            [types.CodeActionTag.LlmGenerated]
            if report.proposer == "llm" and support.llm_tag
            else None
        )
        limit = self.ctx.settings(uri).max_code_actions
        actions = []
        for rank, cand in enumerate(candidates[:limit]):
            action = types.CodeAction(
                title=present.candidate_title(cand),
                kind=types.CodeActionKind.RefactorRewrite,
                tags=tags,
                is_preferred=rank == 0 or None,
            )
            data = {
                "type": "candidate",
                "uri": uri,
                "kernel": kernel.name,
                "candidateId": cand.id,
                "version": doc.version,
            }
            if support.resolve:
                action.data = data
            else:
                args = [uri, kernel.name, cand.id, doc.version]
                action.command = types.Command(
                    title=action.title, command="accelopt.applyCandidate", arguments=args
                )
            actions.append(action)
            if support.resolve and support.preview:
                title = present.candidate_title(cand, preview=True)
                kind = types.CodeActionKind.RefactorRewrite
                preview = {**data, "preview": True}
                actions.append(types.CodeAction(title=title, kind=kind, tags=tags, data=preview))
        return actions

    def _search_action(self, uri: str, kernel: KernelInfo) -> types.CodeAction:
        """Optimize the kernel, or cancel its running search."""
        job = self.ctx.jobs.active_job(uri, kernel.name)
        if job is not None:
            title = f"AccelOpt: cancel the search of {kernel.name} ({job.status_line()})"
            command = types.Command(title=title, command="accelopt.cancel", arguments=[job.id])
        else:
            title = f"AccelOpt: optimize {kernel.name} (beam search)"
            command = types.Command(
                title=title, command="accelopt.optimize", arguments=[uri, kernel.name]
            )
        return types.CodeAction(title=title, kind=types.CodeActionKind.Refactor, command=command)

    async def resolve_code_action(self, action: types.CodeAction) -> types.CodeAction:
        """``codeAction/resolve``: fill in the edit of a rewrite or a harness insertion (an
        action without data, e.g. optimize, comes back as it is).

        Raises:
            JsonRpcInvalidParams: ``data`` is not what this server put there.
            JsonRpcContentModified: the document changed since the action was offered.
        """
        if action.data is None:
            return action
        data = _resolve_data(action.data)
        if data["type"] == "candidate":
            try:
                action.edit, _ = self.edits.candidate(
                    data["uri"],
                    data["kernel"],
                    data["candidateId"],
                    data["version"],
                    preview=data.get("preview") is True,
                )
            except JsonRpcContentModified as exc:
                log.debug("%s", exc.message)
                self.ctx.show(types.MessageType.Warning, exc.message)
                raise
        else:
            doc, kf = await self.ctx.docs.parsed(data["uri"])
            if doc is None or kf is None or data["version"] != doc.version:
                raise JsonRpcContentModified(
                    "AccelOpt: the document changed; ask for the code actions again"
                )
            if data["kernel"] not in kf.kernel_names:
                raise JsonRpcContentModified(f"AccelOpt: no kernel {data['kernel']} any more")
            action.edit = self.edits.harness(doc, kf, data["kernel"])
        return action

    async def cmd_apply_candidate(self, *args: Any) -> dict[str, Any]:
        """``accelopt.applyCandidate [uri, kernelName, candidateId, version]``: send the
        candidate's edit as ``workspace/applyEdit``."""
        uri, kernel, cand_id, version = command_args(
            "accelopt.applyCandidate", args, ["uri", "kernelName", "candidateId", "version"]
        )
        try:
            edit, title = self.edits.candidate(uri, kernel, cand_id, version)
        except JsonRpcContentModified as exc:
            return {"applied": False, "message": exc.message}
        result = await self.ctx.apply_edit(types.ApplyWorkspaceEditParams(edit=edit, label=title))
        if not result.applied:
            reason = result.failure_reason or "the client did not apply the edit"
            return {"applied": False, "message": reason}
        self.ctx.refresh_lenses()
        return {"applied": True}


def _pick_action(uri: str, kf: KernelFile, count: int) -> types.CodeAction:
    """Pick which of ``count`` harness files measures the module (``accelopt.pickHarness``)."""
    title = f"AccelOpt: pick the harness of {os.path.basename(kf.path)} ({count} found)"
    command = types.Command(title=title, command="accelopt.pickHarness", arguments=[uri])
    return types.CodeAction(title=title, kind=types.CodeActionKind.QuickFix, command=command)


def _resolve_data(data: Any) -> dict[str, Any]:
    """The ``data`` of an action this server offered, checked.

    Raises:
        JsonRpcInvalidParams: not an object of a known type with string ``uri`` / ``kernel``
            (/ ``candidateId``) and an integer or null ``version``.
    """
    kind = data.get("type") if isinstance(data, dict) else None
    fields = {"candidate": ["uri", "kernel", "candidateId"], "harness": ["uri", "kernel"]}
    if kind not in fields:
        raise JsonRpcInvalidParams(f"codeAction/resolve: unknown action data {data!r:.80}")
    for name in fields[kind]:
        if not isinstance(data.get(name), str):
            raise JsonRpcInvalidParams(f"codeAction/resolve: data.{name} must be a string")
    version = data.get("version")
    if version is not None and (not isinstance(version, int) or isinstance(version, bool)):
        raise JsonRpcInvalidParams("codeAction/resolve: data.version must be an integer")
    if not isinstance(data.get("preview", False), bool):
        raise JsonRpcInvalidParams("codeAction/resolve: data.preview must be a boolean")
    return {**data, "version": version}


def _kernels_in(doc: TextDocument, kf: KernelFile, rng: types.Range) -> list[KernelInfo]:
    """The kernels whose lines the range touches (none when it starts outside the document)."""
    lines = source_lines(kf.source)
    start = from_lsp_position(lines, doc.position_codec, rng.start)
    end = from_lsp_position(lines, doc.position_codec, rng.end) or start
    if start is None:
        return []
    return [k for k in kf.kernels if k.range.start_line <= end[0] and k.range.end_line >= start[0]]
