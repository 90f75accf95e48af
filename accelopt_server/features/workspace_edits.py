"""The workspace edits behind the code actions: a harness skeleton (a new file next to the
kernel module where the client can create files, else appended to the file), and a
candidate carried onto the document as it is now (:func:`accelopt_server.edits.rebase`), as
versioned document changes where the client supports them."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from lsprotocol import types
from pygls.exceptions import JsonRpcContentModified

from .. import present
from ..edits import RebaseConflict, rebase, text_edits
from ..harnesses import harness_file_name, harness_file_text
from .results import ResultsFeature

if TYPE_CHECKING:
    from pygls.workspace import TextDocument

    from accelopt_core.kernelfile import KernelFile

    from ..context import ServerContext


#: The id of the change annotation of a previewed candidate edit.
PREVIEW = "accelopt.preview"


class WorkspaceEdits:
    """Builds the edits of the code actions (for ``codeAction/resolve`` and
    ``accelopt.applyCandidate``)."""

    def __init__(self, ctx: ServerContext) -> None:
        self.ctx = ctx

    def wrap(self, doc: TextDocument, edits: list[types.TextEdit]) -> types.WorkspaceEdit:
        """The edits as a versioned document change where the client supports it."""
        if self.ctx.capability("workspace.workspace_edit.document_changes", False):
            versioned = types.OptionalVersionedTextDocumentIdentifier(
                uri=doc.uri, version=doc.version
            )
            return types.WorkspaceEdit(
                document_changes=[types.TextDocumentEdit(text_document=versioned, edits=edits)]
            )
        return types.WorkspaceEdit(changes={doc.uri: edits})

    def can_create_files(self) -> bool:
        """True when the client applies ``CreateFile`` operations in versioned document
        changes (``workspace.workspaceEdit.resourceOperations`` holds ``create``)."""
        cap = self.ctx.capability
        operations = cap("workspace.workspace_edit.resource_operations", None) or []
        return bool(cap("workspace.workspace_edit.document_changes", False)) and any(
            getattr(op, "value", op) == "create" for op in operations
        )

    def harness(self, doc: TextDocument, kf: KernelFile, kernel_name: str) -> types.WorkspaceEdit:
        """A harness skeleton for ``kernel_name``: a new file next to the module where the
        client can create files (:meth:`harness_file`), else appended to the document."""
        if self.can_create_files():
            return self.harness_file(kf, kernel_name)
        return self.harness_append(doc, kf, kernel_name)

    def harness_file(self, kf: KernelFile, kernel_name: str) -> types.WorkspaceEdit:
        """Create ``bench_<module>.py`` next to the kernel module (a ``CreateFile`` that never
        overwrites, then its text): the entry's import (``from <dotted module> import
        <launcher>``) and the ``get_inputs`` / ``reference`` / ``BENCH`` skeleton."""
        module = self.ctx.adapter.module_name(kf.path, self.ctx.docs.folders())
        launcher = kf.launcher_for(kernel_name)
        imported = (launcher.name if launcher is not None else kernel_name).split(".")[0]
        skeleton = self.ctx.adapter.harness_skeleton(kf, kernel_name)
        uri = Path(harness_file_name(kf.path)).as_uri()
        start = types.Position(line=0, character=0)
        insert = types.TextEdit(
            range=types.Range(start=start, end=start),
            new_text=harness_file_text(module, imported, skeleton),
        )
        target = types.OptionalVersionedTextDocumentIdentifier(uri=uri, version=None)
        create = types.CreateFile(
            uri=uri, options=types.CreateFileOptions(overwrite=False, ignore_if_exists=False)
        )
        return types.WorkspaceEdit(
            document_changes=[create, types.TextDocumentEdit(text_document=target, edits=[insert])]
        )

    def harness_append(
        self, doc: TextDocument, kf: KernelFile, kernel_name: str
    ) -> types.WorkspaceEdit:
        """Append a harness skeleton for ``kernel_name`` to the document."""
        source = doc.source
        skeleton = self.ctx.adapter.harness_skeleton(kf, kernel_name)
        sep = "" if source.endswith("\n") or not source else "\n"
        new = f"{source}{sep}\n\n{skeleton.rstrip()}\n"
        return self.wrap(doc, text_edits(source, new, doc.position_codec))

    def candidate(
        self, uri: str, kernel: str, candidate_id: str, version: object, *, preview: bool = False
    ) -> tuple[types.WorkspaceEdit, str]:
        """The edit applying a candidate to the document version it was offered for, and the
        candidate's title. With ``preview``, every text edit carries a change annotation that
        needs confirmation (:meth:`confirmed`): the client shows the diff before applying.

        Raises:
            JsonRpcContentModified: the document changed since (or the lines the candidate
                rewrites were edited), or the candidate is no longer known.
        """
        doc = self.ctx.docs.document(uri)
        if doc is None:
            raise JsonRpcContentModified(f"AccelOpt: {uri} is not open any more")
        if version != doc.version:
            raise JsonRpcContentModified(
                f"AccelOpt: the document changed (version {version} -> {doc.version}) since this "
                "improvement was offered; ask for the code actions again"
            )
        found = self.ctx.feature(ResultsFeature).candidate(uri, kernel, candidate_id)
        if found is None:
            raise JsonRpcContentModified(
                f"AccelOpt: candidate {candidate_id} of {kernel} is no longer available"
            )
        report, cand = found
        current = doc.source
        try:
            merged = rebase(report.original_source, cand.source, current)
        except RebaseConflict as exc:
            raise JsonRpcContentModified(f"AccelOpt: cannot apply {candidate_id}: {exc}") from exc
        edits = text_edits(current, merged, doc.position_codec)
        title = present.candidate_title(cand)
        if preview:
            return self.confirmed(doc, edits, title), title
        return self.wrap(doc, edits), title

    def confirmed(
        self, doc: TextDocument, edits: list[types.TextEdit], label: str
    ) -> types.WorkspaceEdit:
        """``edits`` as a versioned document change whose edits share one change annotation
        with ``needsConfirmation`` (LSP 3.16): VS Code opens its refactor preview on it."""
        annotation = types.ChangeAnnotation(
            label=label,
            needs_confirmation=True,
            description="AccelOpt: the verified candidate's diff, applied only when confirmed",
        )
        annotated: list[types.TextEdit | types.AnnotatedTextEdit] = [
            types.AnnotatedTextEdit(range=e.range, new_text=e.new_text, annotation_id=PREVIEW)
            for e in edits
        ]
        versioned = types.OptionalVersionedTextDocumentIdentifier(uri=doc.uri, version=doc.version)
        return types.WorkspaceEdit(
            document_changes=[types.TextDocumentEdit(text_document=versioned, edits=annotated)],
            change_annotations={PREVIEW: annotation},
        )
