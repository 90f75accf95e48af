"""``textDocument/codeAction`` over a real LSP session (pytest-lsp): the ranges clients send."""

from __future__ import annotations

from typing import Any

import pytest
from lsprotocol import types

from tests.lsp_fixtures import LspSession

pytestmark = [pytest.mark.filterwarnings("error::pytest_lsp.LspSpecificationWarning")]


async def actions_for(lsp: LspSession, uri: str, rng: types.Range) -> list[Any]:
    return list(
        await lsp.client.text_document_code_action_async(
            types.CodeActionParams(
                text_document=types.TextDocumentIdentifier(uri=uri),
                range=rng,
                context=types.CodeActionContext(diagnostics=[]),
            )
        )
        or []
    )


@pytest.mark.parametrize("lsp", ["visual-studio-code", "neovim"], indirect=True)
async def test_whole_file_range_gets_the_actions_of_a_kernel_line(lsp: LspSession) -> None:
    """A whole-document range ends at ``{line: line count, character: 0}`` (the position after
    the last line, valid LSP); it touches every kernel, so it gets the actions the kernel's own
    line gets."""
    path, _ = lsp.copy_example("softmax.py")
    uri = lsp.open(path)
    text = lsp.texts[uri]
    assert text.endswith("\n")
    n_lines = len(text.splitlines())
    kernel_line = lsp.line_of(uri, "def softmax_kernel")
    assert kernel_line > 0  # the whole-file range does not start on the kernel
    line_actions = await lsp.code_actions(uri, kernel_line, 6)
    whole = types.Range(
        start=types.Position(line=0, character=0), end=types.Position(line=n_lines, character=0)
    )
    whole_actions = await actions_for(lsp, uri, whole)
    assert [a.title for a in line_actions] == [a.title for a in whole_actions]
    assert any("optimize softmax_kernel" in a.title for a in whole_actions)
    # the range that starts after the last line touches no kernel
    after = types.Range(start=whole.end, end=whole.end)
    assert await actions_for(lsp, uri, after) == []
