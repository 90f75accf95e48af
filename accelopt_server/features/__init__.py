"""The server's features: one small class per feature, each seeing only a
:class:`~accelopt_server.context.ServerContext`.

=====================  ==========================================================================
settings               initialization options, ``workspace/configuration``, configuration changes
diagnostics            parse findings and failed profiles, published per document
results                search reports: restored after a restart, offered, cleared
profiling              profile on save and ``accelopt.profile``
search                 background searches: ``accelopt.optimize``, ``cancel``, ``listJobs``, progress
search_view            the search as a picture: a live view for webviews, an HTML file (issue 32)
code_lenses            the lenses above each kernel
hover                  hover and ``accelopt.showMemory`` (the optimization memory)
code_actions           apply an improvement, insert a harness, optimize / cancel
harnesses              harness files of kernel modules: discovery kept current, the user's pick
harness_documents      a harness file open in the editor: its module's lenses, profile on save
=====================  ==========================================================================

:data:`FEATURES` is the order in which the server calls their lifecycle hooks (settings are pulled
before a document's diagnostics are published, reports restored before the lenses refresh).
:data:`COMMANDS` maps each ``workspace/executeCommand`` name (arguments as JSON arrays) to the
feature method that answers it:

* ``accelopt.optimize [uri, kernelName]`` -> ``{jobId, started, message?}``
* ``accelopt.cancel [jobId]`` or ``[uri, kernelName]`` -> ``{cancelled, message?}``
* ``accelopt.profile [uri, kernelName?]`` -> ``{kernels: {name: EvalResult dict + summary,
  version}, message?}``
* ``accelopt.showMemory [uri, kernelName]`` -> markdown
* ``accelopt.clearResults [uri?]`` -> ``{cleared, reports, profiles}``
* ``accelopt.listJobs []`` -> ``[{jobId, uri, kernel, state, iteration, iterations,
  bestSpeedup, evaluated, message}]``
* ``accelopt.showStatus [uri, kernelName]`` -> ``{kernel, message, job?, profile?,
  improvements}`` (what a lens label runs; also shown as ``window/showMessage``)
* ``accelopt.applyCandidate [uri, kernelName, candidateId, version]`` -> ``{applied, message?}``
  (for clients without ``codeAction/resolve``: the edit goes out as ``workspace/applyEdit``)
* ``accelopt.showSettings [uri?]`` -> ``{target, targetSource, settings: {key: value},
  sources: {key: source}}`` (the effective settings of ``uri``'s scope, server-wide without)
* ``accelopt.pickHarness [uri, harnessPath?]`` -> ``{harness, candidates, message?}`` (which of
  several harness files measures the kernel module; asks the user without ``harnessPath``)
* ``accelopt.searchView [uri, kernelName]`` -> ``{uri, kernel, jobId, running, view, assets,
  actions, message?}`` (then ``accelopt/searchView`` notifications until
  ``accelopt.searchViewClosed [uri, kernelName]``); ``accelopt.showSearch [uri, kernelName?]``
  -> ``{path, kernel, message}`` (the view as an HTML file; see :mod:`.search_view`)
"""

from __future__ import annotations

from .base import LanguageFeature
from .code_actions import CodeActionsFeature
from .code_lenses import CodeLensFeature
from .diagnostics import DiagnosticsFeature
from .harness_documents import HarnessDocumentsFeature
from .harnesses import HarnessFeature
from .hover import HoverFeature
from .profiling import ProfilingFeature
from .results import ResultsFeature
from .search import SearchJobsFeature
from .search_view import SearchViewFeature
from .settings import SettingsFeature

FEATURES: tuple[type[LanguageFeature], ...] = (
    SettingsFeature,
    HarnessFeature,
    DiagnosticsFeature,
    ResultsFeature,
    ProfilingFeature,
    SearchJobsFeature,
    SearchViewFeature,
    CodeLensFeature,
    HoverFeature,
    CodeActionsFeature,
    HarnessDocumentsFeature,
)

COMMANDS: dict[str, tuple[type[LanguageFeature], str]] = {
    "accelopt.optimize": (SearchJobsFeature, "cmd_optimize"),
    "accelopt.cancel": (SearchJobsFeature, "cmd_cancel"),
    "accelopt.profile": (ProfilingFeature, "cmd_profile"),
    "accelopt.showMemory": (HoverFeature, "cmd_show_memory"),
    "accelopt.clearResults": (ResultsFeature, "cmd_clear_results"),
    "accelopt.listJobs": (SearchJobsFeature, "cmd_list_jobs"),
    "accelopt.showStatus": (CodeLensFeature, "cmd_show_status"),
    "accelopt.applyCandidate": (CodeActionsFeature, "cmd_apply_candidate"),
    "accelopt.showSettings": (SettingsFeature, "cmd_show_settings"),
    "accelopt.pickHarness": (HarnessFeature, "cmd_pick_harness"),
    "accelopt.searchView": (SearchViewFeature, "cmd_search_view"),
    "accelopt.searchViewClosed": (SearchViewFeature, "cmd_search_view_closed"),
    "accelopt.showSearch": (SearchViewFeature, "cmd_show_search"),
}

__all__ = [
    "COMMANDS",
    "FEATURES",
    "CodeActionsFeature",
    "CodeLensFeature",
    "DiagnosticsFeature",
    "HarnessDocumentsFeature",
    "HarnessFeature",
    "HoverFeature",
    "LanguageFeature",
    "ProfilingFeature",
    "ResultsFeature",
    "SearchJobsFeature",
    "SearchViewFeature",
    "SettingsFeature",
]
