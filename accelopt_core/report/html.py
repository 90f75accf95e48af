"""The search view as one self-contained HTML file (issue 32), and the assets it is drawn with.

The page is ``assets/page.html`` with everything inlined: the style (``assets/view.css``),
Plotly's JavaScript (``plotly.min.js``, shipped by the ``plotly`` package from PyPI and read
from its package data: no CDN, no network when viewed), the page's own script
(``assets/view.js``, which draws the tree, the best speedup per iteration, the roofline, the
candidate table and the selected candidate's details) and the view's JSON
(:func:`accelopt_core.report.model.build_view`) in a ``<script type="application/json">``
block. Every text of the view reaches the page as JSON data, escaped so that no ``</script>``
or markup in a plan, a reason or a diff can end the block, and the script writes it into the
page as text, never as HTML.

Why Plotly: it is the one charting library whose Python package ships its JavaScript bundle
(``plotly/package_data/plotly.min.js``, MIT, about 4.8 MB), so ``accelopt`` writes the file
with nothing but pip; it draws all three pictures (the tree as a scatter with its edges, a
line, a log-log roofline) with hover and click. Vega-Lite's Python side (altair) and pyecharts
load their JavaScript from a CDN, and cytoscape.js and ECharts come only from npm.

The VS Code webview draws the same view with the same script and style, loaded from
:func:`asset_paths` as local resources under a content security policy.
"""

from __future__ import annotations

import functools
import html
import importlib.util
import json
import os
import re
import tempfile
from pathlib import Path
from typing import Any

__all__ = [
    "MAX_BYTES",
    "ReportUnavailable",
    "asset_paths",
    "embed_json",
    "fit",
    "plotly_js_path",
    "render_html",
    "write_html",
]

#: The largest report file written (bytes): the issue's bound.
MAX_BYTES = 10 * 2**20
#: Diff lines kept per candidate, tried in this order until the file fits :data:`MAX_BYTES`.
_DIFF_LINES = (None, 400, 120, 40, 0)
_ASSETS = Path(__file__).resolve().parent / "assets"
_INSTALL = "pip install plotly (or reinstall accelopt, which depends on it)"


class ReportUnavailable(RuntimeError):
    """The report cannot be drawn here: Plotly's JavaScript is missing (the message says how to
    install it)."""


def plotly_js_path() -> Path:
    """The ``plotly.min.js`` shipped in the ``plotly`` package (found without importing it).

    Raises:
        ReportUnavailable: ``plotly`` is not installed, or its bundle is missing.
    """
    spec = importlib.util.find_spec("plotly")
    roots = list(spec.submodule_search_locations or []) if spec is not None else []
    for root in roots:
        path = Path(root) / "package_data" / "plotly.min.js"
        if path.is_file():
            return path
    raise ReportUnavailable(f"the search report needs Plotly's JavaScript: {_INSTALL}")


def asset_paths() -> dict[str, str]:
    """Absolute paths of what a page needs: ``plotly`` (``plotly.min.js``), ``script``
    (``view.js``) and ``style`` (``view.css``). Raises ReportUnavailable (see
    :func:`plotly_js_path`)."""
    return {
        "plotly": str(plotly_js_path()),
        "script": str(_ASSETS / "view.js"),
        "style": str(_ASSETS / "view.css"),
    }


@functools.lru_cache(maxsize=8)
def _read(path: str, mtime_ns: int, inline: bool) -> str:
    text = Path(path).read_text(encoding="utf-8")
    if inline:  # inlined in a <script> or <style> element, which "</script" would end
        text = re.sub(r"</(script|style)", r"<\\/\1", text, flags=re.IGNORECASE)
    return text


def _asset(path: str | Path, *, inline: bool = True) -> str:
    return _read(str(path), os.stat(path).st_mtime_ns, inline)


def embed_json(data: Any) -> str:
    """``data`` as JSON that is safe inside a ``<script type="application/json">`` element:
    ``<``, ``>``, ``&`` and the line separators U+2028/U+2029 are written as ``\\u`` escapes
    (JSON.parse reads them back), so no text in it can close the element or start markup."""
    text = json.dumps(data, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    for char, escape in (
        ("<", "\\u003c"),
        (">", "\\u003e"),
        ("&", "\\u0026"),
        ("\u2028", "\\u2028"),
        ("\u2029", "\\u2029"),
    ):
        text = text.replace(char, escape)
    return text


def _cut_diffs(view: dict[str, Any], keep: int | None) -> dict[str, Any]:
    """``view`` with each node's diff cut to ``keep`` lines (None: as it is), with a note."""
    if keep is None:
        return view
    nodes = []
    for node in view.get("nodes", []):
        lines = (node.get("diff") or "").splitlines()
        if len(lines) > keep:
            cut = "\n".join(lines[:keep])
            note = f"... {len(lines) - keep} more diff lines left out to keep the report small"
            node = {**node, "diff": f"{cut}\n{note}" if keep else note}
        nodes.append(node)
    return {**view, "nodes": nodes}


def fit(view: dict[str, Any], budget: int) -> tuple[dict[str, Any], str]:
    """``view`` and its :func:`embed_json`, with diffs cut (400, 120, 40, then 0 lines per
    candidate) until the JSON takes at most ``budget`` bytes (UTF-8); the last try is returned
    even when it is larger."""
    data = embed_json(view)
    for keep in _DIFF_LINES[1:]:
        if len(data.encode("utf-8")) <= budget:
            break
        view = _cut_diffs(view, keep)
        data = embed_json(view)
    return view, data


def render_html(view: dict[str, Any]) -> str:
    """The self-contained page of ``view`` (:func:`~accelopt_core.report.model.build_view`),
    at most :data:`MAX_BYTES` (candidate diffs are cut to fit).

    Raises:
        ReportUnavailable: Plotly's JavaScript is missing.
    """
    files = (plotly_js_path(), _ASSETS / "page.html", _ASSETS / "view.css", _ASSETS / "view.js")
    plotly, template = _asset(files[0]), _asset(files[1], inline=False)
    style, script = _asset(files[2]), _asset(files[3])
    fixed = sum(os.path.getsize(path) for path in files)  # UTF-8 bytes, before escaping
    _, data = fit(view, MAX_BYTES - fixed - 64 * 1024)
    meta = view.get("meta") or {}
    title = f"AccelOpt search · {meta.get('kernel') or 'kernel'} in {meta.get('file') or '?'}"
    parts = {
        "TITLE": html.escape(title),
        "STYLE": style,
        "PLOTLY": plotly,
        "SCRIPT": script,
        "DATA": data,
        "CSP": "",
    }
    return re.sub(r"<!--@(\w+)@-->", lambda m: parts[m.group(1)], template)


def write_html(view: dict[str, Any], path: str | Path) -> Path:
    """Write :func:`render_html` of ``view`` to ``path`` (atomically: a temporary file in the
    same directory, renamed; parent directories are created). Returns the absolute path.

    Raises:
        ReportUnavailable: Plotly's JavaScript is missing.
        OSError: the file cannot be written.
    """
    target = Path(path).expanduser().resolve()
    page = render_html(view)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".report-", suffix=".html", dir=str(target.parent))
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(page)
        os.chmod(tmp, 0o644)
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return target
