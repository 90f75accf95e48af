"""The extension in a real VS Code (issue 23): code-server with the freshly packaged ``.vsix``,
driven through the DOM by Playwright in Debian's headless Chromium.

Runs only from ``.ci/vscode-e2e`` (which installs code-server, Chromium and Playwright and sets
``ACCELOPT_VSCODE_E2E=1``); the plain ``python -m pytest`` skips it. Every step leaves a
screenshot in the folder printed at the start; it is kept when the test fails.
``ACCELOPT_E2E_README_SHOTS=DIR`` also writes the README's pictures there.
"""

from __future__ import annotations

import os
import re
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import pytest

if os.environ.get("ACCELOPT_VSCODE_E2E") != "1":
    pytest.skip(
        "the real-VS-Code test runs from .ci/vscode-e2e (code-server, Chromium, Playwright)",
        allow_module_level=True,
    )

from playwright.sync_api import Page, sync_playwright  # noqa: E402

from tests.vscode.codeserver import GRACE_S, CodeServer, server_pids  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "triton" / "elementwise.py"
KERNEL = "add_gelu_kernel"
TOLERANCE = "1e-05*max|ref| + 0.0001*|ref|"
MISSING_REFERENCE_LENS = "AccelOpt: the harness lacks reference(*inputs) (see Problems) · memory"


def workspace(root: Path) -> Path:
    """The folder VS Code opens: the example, a copy whose harness lacks ``reference``, and a
    copy whose reference is wrong (0.6 instead of 0.5)."""
    ws = root / "ws"
    ws.mkdir()
    source = EXAMPLE.read_text()
    (ws / "elementwise.py").write_text(source)
    assert "\ndef reference(" in source and "return 0.5 * s * (1.0" in source
    (ws / "missing_ref.py").write_text(source.replace("\ndef reference(", "\ndef expected("))
    (ws / "wrong_ref.py").write_text(
        source.replace("return 0.5 * s * (1.0", "return 0.6 * s * (1.0")
    )
    return ws


def user_settings(root: Path) -> dict:
    return {
        "accelopt.interpreter": sys.executable,
        "accelopt.memoryDir": str(root / "memory"),
        "accelopt.profileOnSave": True,
        "workbench.startupEditor": "none",
        "workbench.tips.enabled": False,
        "workbench.secondarySideBar.defaultVisibility": "hidden",
        "workbench.enableExperiments": False,
        "chat.disableAIFeatures": True,
        "extensions.ignoreRecommendations": True,
        "telemetry.telemetryLevel": "off",
        "window.restoreWindows": "none",
        "editor.hover.delay": 200,
        "editor.minimap.enabled": False,
        "files.refactoring.autoSave": True,
    }


class Steps:
    """Screenshots of every step, in ``folder``; :meth:`failed` adds one of every open page."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.count = 0
        self.name = "start"
        self.pages: list[Page] = []

    def failed(self) -> None:
        for i, page in enumerate(self.pages):
            if not page.is_closed():
                page.screenshot(path=str(self.folder / f"failed-window-{i + 1}.png"))

    def shot(self, page: Page, name: str) -> None:
        self.count += 1
        self.name = name
        page.screenshot(path=str(self.folder / f"{self.count:02d}-{name}.png"))


def until(what: str, check: Callable[[], object], timeout: float = 60.0) -> object:
    """Poll ``check`` until it returns something truthy; AssertionError naming ``what``."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        try:
            last = check()
        except Exception as exc:  # noqa: BLE001 - the DOM changes under us; try again
            last = exc
        if last and not isinstance(last, Exception):
            return last
        time.sleep(0.25)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what} (last: {last!r})")


def lenses(page: Page) -> list[str]:
    """The code lens lines of the visible editor, ``"Profile | Optimize"``."""
    texts = page.eval_on_selector_all(".codelens-decoration", "els => els.map(e => e.innerText)")
    return [re.sub(r"\s*\|\s*", " | ", t.replace("\xa0", " ")).strip() for t in texts]


def click_lens(page: Page, text: str) -> None:
    page.locator(".codelens-decoration a", has_text=text).first.click()


def open_file(page: Page, name: str) -> None:
    """Open ``name`` from the Explorer (a double click keeps it open, not as a preview)."""
    page.mouse.move(0, 0)
    page.keyboard.press("Escape")
    page.locator(".explorer-folders-view .monaco-list-row", has_text=name).first.dblclick()
    until(f"{name} open", lambda: page.locator(f".tab.active[aria-label*='{name}']").count())


def kernel_name(page: Page):
    return page.locator(".view-lines span span", has_text=re.compile(f"^{KERNEL}$")).first


def code_actions(page: Page) -> list[str]:
    kernel_name(page).click()
    page.keyboard.press("Control+.")
    rows = page.locator(".action-widget .monaco-list-row")
    until("the code action menu", lambda: rows.count())
    return [t.strip() for t in rows.all_inner_texts()]


def hover_text(page: Page) -> str:
    page.mouse.move(0, 0)
    kernel_name(page).hover()
    box = page.locator(".monaco-hover:not(.hidden) .hover-contents")
    until("the hover", lambda: "AccelOpt" in " ".join(box.all_inner_texts()))
    return "\n".join(box.all_inner_texts())


def problems(page: Page) -> list[str]:
    return [t.strip() for t in page.locator(".markers-panel .monaco-list-row").all_inner_texts()]


def search_view(page: Page, ws: Path, steps: Steps) -> None:
    """Issue 32: AccelOpt: Show Search opens the search as a webview beside the kernel (the
    tree's nodes, the ranked candidate's diff); its Preview runs the candidate's code action,
    whose refactor preview is discarded; the webview is closed again."""
    original = (ws / "elementwise.py").read_text()
    # the palette's command (the lens runs the same view, but this window clips its long line)
    page.mouse.move(0, 0)
    page.keyboard.press("Escape")
    kernel_name(page).click()
    page.keyboard.press("F1")
    page.keyboard.type("AccelOpt: Show Search")
    row = page.locator(".quick-input-list .monaco-list-row", has_text="AccelOpt: Show Search")
    until("the Show Search command", lambda: row.count())
    row.first.click()  # not Enter: "Show Running Searches" may be the row the palette focuses
    view = page.frame_locator("iframe.webview.ready").frame_locator("#active-frame")
    points = view.locator("#tree .point.plotly-customdata")
    until("the search view's tree", lambda: points.count() >= 2, 60)
    until("the ranked candidate's diff", lambda: view.locator("#details .diff .add").count(), 30)
    assert "ranked: verified faster" in view.locator("#details h3").inner_text()
    steps.shot(page, "search-view")
    shots = os.environ.get("ACCELOPT_E2E_README_SHOTS")
    if shots:
        view.locator("#tree").scroll_into_view_if_needed()
        page.screenshot(path=f"{shots}/vscode-search.png")
    view.get_by_role("button", name="Preview").click()
    discard = page.get_by_role("button", name="Discard")
    until(
        "the refactor preview from the view", lambda: discard.count() and discard.first.is_visible()
    )
    steps.shot(page, "search-view-preview")
    discard.first.click()
    assert (ws / "elementwise.py").read_text() == original
    tab = page.locator(".tab", has_text=f"Search: {KERNEL}")
    tab.first.click(button="middle")  # VS Code closes a tab on a middle click
    until("the search view closed", lambda: not tab.count(), 30)


@pytest.fixture
def vscode(request):
    root = Path(tempfile.mkdtemp(prefix="accelopt-vscode-"))
    shots = root / "screenshots"
    shots.mkdir()
    print(f"\nVS Code e2e: screenshots of every step in {shots}")
    server = CodeServer(root, user_settings(root))
    server.install(os.environ["ACCELOPT_VSIX"])
    server.start()
    steps = Steps(shots)
    try:
        with sync_playwright() as pw:
            browser = pw.chromium.launch(
                executable_path=os.environ.get("ACCELOPT_CHROMIUM", "/usr/bin/chromium"),
                args=["--no-sandbox", "--disable-gpu"],
            )
            yield server, browser, workspace(root), steps
            if getattr(request.node, "failed", True):
                steps.failed()
            browser.close()
    finally:
        server.stop()
        if not getattr(request.node, "failed", True):
            shutil.rmtree(root, ignore_errors=True)
        else:
            print(f"VS Code e2e: failed at step {steps.name!r}; screenshots kept in {shots}")
            print(f"VS Code e2e: code-server log {server.log}")


def test_the_extension_in_a_real_vscode(vscode) -> None:
    server, browser, ws, steps = vscode
    page = browser.new_page(viewport={"width": 1280, "height": 800})
    steps.pages.append(page)
    page.goto(server.url(ws))
    page.wait_for_selector(".monaco-workbench", timeout=60_000)
    open_file(page, "elementwise.py")
    original = (ws / "elementwise.py").read_text()

    # lenses before and after Profile
    until("Profile | Optimize", lambda: "Profile | Optimize" in lenses(page), 90)
    steps.shot(page, "lenses-before-profile")
    click_lens(page, "Profile")
    profiled = re.compile(r"^[\d.]+ ms · [^|]*correct · interpreter\b")
    until("a profile lens", lambda: any(profiled.match(t) for t in lenses(page)), 120)
    steps.shot(page, "lenses-after-profile")

    # the progress lens and Cancel
    click_lens(page, "Optimize")
    until(
        "the progress lens",
        lambda: any(re.match(r"AccelOpt: .*\| Cancel$", t) for t in lenses(page)),
    )
    steps.shot(page, "progress-lens")
    click_lens(page, "Cancel")
    until("the search cancelled", lambda: any(profiled.match(t) for t in lenses(page)), 30)

    # a whole search: improvements in the lens, ranked code actions, the best one preferred
    click_lens(page, "Optimize")
    found = re.compile(r"(\d+) improvement\(s\), best ([\d.]+)x \(code actions\)")
    until("improvements", lambda: any(found.search(t) for t in lenses(page)), 240)
    steps.shot(page, "improvements")
    search_view(page, ws, steps)
    actions = code_actions(page)
    steps.shot(page, "code-actions")
    shots = os.environ.get("ACCELOPT_E2E_README_SHOTS")
    if shots:
        page.screenshot(
            path=f"{shots}/vscode-actions.png",
            clip={"x": 350, "y": 370, "width": 640, "height": 300},
        )
    best = next(t for t in actions if t.startswith("AccelOpt: ") and "x faster — " in t)
    assert actions.index(best) < actions.index(best.replace("AccelOpt: ", "AccelOpt: preview ", 1))

    # preview: the refactor preview shows the diff; Discard leaves the file as it was
    page.locator(".action-widget .monaco-list-row", has_text="AccelOpt: preview").first.click()
    discard = page.get_by_role("button", name="Discard")
    until("the refactor preview", lambda: discard.count() and discard.first.is_visible())
    steps.shot(page, "refactor-preview")
    discard.first.click()
    assert (ws / "elementwise.py").read_text() == original

    # one keystroke applies the best: the file changes on disk and is profiled again
    code_actions(page)
    page.keyboard.press("Enter")
    until("the file rewritten", lambda: (ws / "elementwise.py").read_text() != original, 30)
    steps.shot(page, "applied")
    until("a new profile", lambda: any(profiled.match(t) for t in lenses(page)), 120)

    # the hover on the kernel's name
    text = hover_text(page)
    steps.shot(page, "hover")
    if shots:
        box = page.locator(".monaco-hover:not(.hidden)").first.bounding_box()
        name = kernel_name(page).bounding_box()
        top, bottom = box["y"] - 30, name["y"] + name["height"] + 8
        clip = {"x": 352, "y": top, "width": 860, "height": bottom - top}
        page.screenshot(path=f"{shots}/vscode-hover.png", clip=clip)
    assert f"AccelOpt · {KERNEL} (triton)" in text and "Last profile: " in text

    # a harness lacking only `reference`: the lens says so, the Problems panel says why
    open_file(page, "missing_ref.py")
    until("the missing-reference lens", lambda: MISSING_REFERENCE_LENS in lenses(page))
    steps.shot(page, "missing-reference")

    # a wrong reference: the incorrect diagnostic, and the hover keeps the tolerance as written
    open_file(page, "wrong_ref.py")
    until("Profile | Optimize", lambda: "Profile | Optimize" in lenses(page), 60)
    click_lens(page, "Profile")
    until("an incorrect profile", lambda: any(t.startswith("incorrect") for t in lenses(page)), 120)
    text = hover_text(page)
    steps.shot(page, "hover-incorrect")
    line = next(t for t in text.splitlines() if t.startswith("Last profile: "))
    assert TOLERANCE in line, line
    assert page.locator(".monaco-hover:not(.hidden) .hover-contents em").count() == 0
    page.keyboard.press("Escape")
    page.keyboard.press("Control+Shift+M")
    until(
        "both diagnostics",
        lambda: len([p for p in problems(page) if "reference" in p or TOLERANCE in p]) >= 2,
        30,
    )
    steps.shot(page, "problems")
    messages = problems(page)
    assert any("harness has no reference(*inputs)" in m for m in messages), messages
    assert any("incorrect" in m.lower() or TOLERANCE in m for m in messages), messages

    # a second window on the same folder (and memory directory) gets its own server
    second = browser.new_page(viewport={"width": 1280, "height": 800})
    steps.pages.append(second)
    second.goto(server.url(ws))
    second.wait_for_selector(".monaco-workbench", timeout=60_000)
    open_file(second, "elementwise.py")
    until("lenses in the second window", lambda: any("Optimize" in t for t in lenses(second)), 90)
    steps.shot(second, "second-window")
    assert f"AccelOpt · {KERNEL}" in hover_text(second)
    assert len(server_pids(server.proc.pid)) == 2

    # closing the windows ends their servers (after code-server's reconnection grace time)
    page.close()
    second.close()
    until("the servers gone", lambda: not server_pids(server.proc.pid), GRACE_S + 60)
