"""Reading a written search report back (issue 32): the view JSON embedded in the page."""

from __future__ import annotations

import json

_OPEN = '<script type="application/json" id="accelopt-view">'


def view_of(page: str) -> dict:
    """The view (:func:`accelopt_core.report.build_view`) a report page carries."""
    block = page.split(_OPEN, 1)[1].split("</script>", 1)[0]
    return json.loads(block)
