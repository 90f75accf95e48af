"""A search you can see (issue 32): the beam search as a picture.

- :mod:`.model`: :func:`build_view`, the view of one search (its tree of candidates, the best
  speedup per iteration, the roofline, the candidates' details, the experiences it added)
  from its report dict;
- :mod:`.live`: :class:`LiveView`, the same view of a running search, kept from its events
  (what the language server sends an editor);
- :mod:`.html`: :func:`render_html` / :func:`write_html`, one self-contained HTML file
  (Plotly's JavaScript inlined: no network when viewed, at most 10 MB), and the assets the VS
  Code webview loads (:func:`asset_paths`);
- :mod:`.sources`: :func:`find_report`, the saved search ``accelopt report`` draws.
"""

from accelopt_core.report.html import (
    MAX_BYTES,
    ReportUnavailable,
    asset_paths,
    render_html,
    write_html,
)
from accelopt_core.report.live import LiveView
from accelopt_core.report.model import SCHEMA, VERDICTS, build_view
from accelopt_core.report.sources import ReportNotFound, find_report

__all__ = [
    "MAX_BYTES",
    "SCHEMA",
    "VERDICTS",
    "LiveView",
    "ReportNotFound",
    "ReportUnavailable",
    "asset_paths",
    "build_view",
    "find_report",
    "render_html",
    "write_html",
]
