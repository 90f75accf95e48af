"""The docs site's Reference pages, generated from the sources at build time (issue 51).

MkDocs loads this file as a hook (``hooks:`` in ``mkdocs.yml``): :func:`on_files` adds one
generated page per entry of :data:`PAGES`, so no reference page is a hand-edited copy that can
drift. ``tests/docs/test_reference.py`` builds the same text with :func:`page_text` and checks
that every command, option, setting, ``BENCH`` key, report field and language-server command of
the sources has its entry.

The sources:

* ``accelopt`` commands and options: :func:`accelopt_cli.main.build_parser` (argparse);
* settings: :func:`accelopt_core.settings.settings_markdown` (the settings model);
* ``BENCH`` keys: :data:`accelopt_core.kernelfile.model.BENCH_KEYS`;
* the JSON report: :meth:`accelopt_core.search.report.SearchReport.to_dict`,
  :meth:`accelopt_core.search.candidate.Candidate.to_dict`,
  :class:`accelopt_core.onsite.protocol.EvalResult` and
  :class:`accelopt_core.search.report.FailedCandidate`;
* the language server: the handlers, commands and code-action kinds a real
  :func:`accelopt_server.server.create_server` registers, the LSP messages ``accelopt_server``
  sends (found in its source) and its own notifications (``accelopt/...`` constants);
* verdicts: ``EVAL_STATUSES``, ``FAILURE_STAGES``, the gate's ``RULES`` and the judge's
  ``*_RULE`` constants.

:func:`on_page_markdown` also replaces each ``<!-- gen: NAME -->`` marker of a hand-written page
by the text :data:`INCLUDES` makes from the sources (the KernelBench mapping).

A key a source gains without a description renders as ``UNDESCRIBED``, which the test refuses:
add its line to the tables of ``refgen_core.py`` / ``refgen_server.py`` (this folder).
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

_HERE = str(Path(__file__).resolve().parent)
if _HERE not in sys.path:  # MkDocs loads hooks by path: their siblings are not importable
    sys.path.insert(0, _HERE)

from refgen_common import ROOT, UNDESCRIBED  # noqa: E402
from refgen_core import cli_markdown, harness_page, report_page, sample_report, settings_page  # noqa: E402
from refgen_server import lsp_page, verdicts_page  # noqa: E402

__all__ = ["INCLUDES", "PAGES", "ROOT", "UNDESCRIBED", "page_text", "sample_report"]

#: Generated page (path under docs/) -> the function that writes it.
PAGES: dict[str, Callable[[], str]] = {
    "reference/cli.md": cli_markdown,
    "reference/settings.md": settings_page,
    "reference/harness.md": harness_page,
    "reference/report.md": report_page,
    "reference/lsp.md": lsp_page,
    "reference/verdicts.md": verdicts_page,
}


def page_text(path: str) -> str:
    """The generated text of one page of :data:`PAGES`."""
    return PAGES[path]()


def kernelbench_mapping() -> str:
    """How a KernelBench problem maps onto a harness:
    :func:`accelopt_core.kernelfile.kernelbench.mapping_doc`, its heading dropped."""
    from accelopt_core.kernelfile.kernelbench import mapping_doc

    return mapping_doc().removeprefix("**KernelBench problems.** ")


#: ``<!-- gen: NAME -->`` in a hand-written page -> the function whose text replaces it.
INCLUDES: dict[str, Callable[[], str]] = {"kernelbench-mapping": kernelbench_mapping}


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    """MkDocs hook: replace each ``<!-- gen: NAME -->`` marker of a page by its text."""

    def include(m: re.Match[str]) -> str:
        make = INCLUDES.get(m.group(1))
        if make is None:
            raise KeyError(f"{page.file.src_uri}: no generated text named {m.group(1)!r}")
        return make()

    return re.sub(r"<!-- gen: ([\w-]+) -->", include, markdown)


def on_files(files: Any, config: Any) -> Any:
    """MkDocs hook: add the generated reference pages to the site's files."""
    from mkdocs.structure.files import File

    for path, make in PAGES.items():
        files.append(File.generated(config, path, content=make()))
    return files
