/**
 * "AccelOpt: Show Search" (issue 32): a webview beside the kernel that draws its beam search
 * (the tree, the best speedup per iteration, the roofline, each candidate's details) and
 * follows a running search from the server's `accelopt/searchView` notifications. The view
 * is drawn by the server package's own script (the same one the HTML report inlines);
 * Preview and Apply of a ranked candidate run the very code actions the server offers on the
 * kernel. The page and its policy are in searchPage.ts.
 */
import * as vscode from 'vscode';
import { kernelsFromLenses } from './kernels';
import {
  assetDirs,
  makeNonce,
  parseSearchNotice,
  parseSearchView,
  searchPageHtml,
  SearchViewReply,
  viewKey,
} from './searchPage';

/** The server queries the panels need (ServerManager.query). */
export type Query = (command: string, args: unknown[]) => Promise<unknown>;

interface Open {
  panel: vscode.WebviewPanel;
  reply: SearchViewReply;
  ready: boolean;
}

/** ``edit``'s text edits, each marked as needing confirmation (VS Code's refactor preview). */
function confirmed(edit: vscode.WorkspaceEdit, label: string): vscode.WorkspaceEdit {
  const out = new vscode.WorkspaceEdit();
  for (const [uri, edits] of edit.entries()) {
    for (const e of edits) {
      out.replace(uri, e.range, e.newText, { needsConfirmation: true, label });
    }
  }
  return out;
}

export class SearchPanels implements vscode.Disposable {
  private readonly open = new Map<string, Open>();

  constructor(
    private readonly query: Query,
    private readonly log: (line: string) => void,
  ) {}

  /** Opens (or reveals) the search view of `kernel` in `uri`, beside the active editor. */
  async show(uri: string, kernel: string): Promise<void> {
    const key = viewKey(uri, kernel);
    const known = this.open.get(key);
    if (known) {
      known.panel.reveal(vscode.ViewColumn.Beside, true);
      return;
    }
    const reply = parseSearchView(await this.query('accelopt.searchView', [uri, kernel]));
    if (!reply || !reply.view || !reply.assets) {
      await this.query('accelopt.searchViewClosed', [uri, kernel]);
      const why = reply?.message ?? 'the server did not answer (see AccelOpt: Show Logs)';
      void vscode.window.showWarningMessage(`AccelOpt: cannot show the search of ${kernel}: ${why}`);
      return;
    }
    const roots = assetDirs(reply.assets).map((dir) => vscode.Uri.file(dir));
    const panel = vscode.window.createWebviewPanel(
      'accelopt.searchView',
      `Search: ${kernel}`,
      { viewColumn: vscode.ViewColumn.Beside, preserveFocus: true },
      { enableScripts: true, localResourceRoots: roots, retainContextWhenHidden: true },
    );
    const entry: Open = { panel, reply, ready: false };
    this.open.set(key, entry);
    const web = panel.webview;
    const asUri = (path: string) => web.asWebviewUri(vscode.Uri.file(path)).toString();
    web.html = searchPageHtml({
      cspSource: web.cspSource,
      nonce: makeNonce(),
      plotly: asUri(reply.assets.plotly),
      script: asUri(reply.assets.script),
      style: asUri(reply.assets.style),
      title: `Search: ${kernel}`,
    });
    web.onDidReceiveMessage((msg: unknown) => void this.received(entry, msg));
    panel.onDidDispose(() => {
      this.open.delete(key);
      void this.query('accelopt.searchViewClosed', [uri, kernel]);
    });
  }

  /** An `accelopt/searchView` notification: its panel merges the delta or takes the view. */
  async notified(params: unknown): Promise<void> {
    const notice = parseSearchNotice(params);
    const entry = notice && this.open.get(viewKey(notice.uri, notice.kernel));
    if (!notice || !entry) {
      return;
    }
    if (notice.jobId !== entry.reply.jobId) {
      // another search of the kernel began: start over from its whole view
      const fresh = parseSearchView(await this.query('accelopt.searchView', [notice.uri, notice.kernel]));
      if (fresh?.view) {
        entry.reply = fresh;
        void entry.panel.webview.postMessage({ type: 'view', view: fresh.view });
      }
      return;
    }
    if (notice.view) {
      entry.reply.view = notice.view;
      entry.reply.actions = notice.actions ?? {};
      entry.reply.running = false;
      void entry.panel.webview.postMessage({ type: 'view', view: notice.view });
    } else if (entry.ready) {
      void entry.panel.webview.postMessage({ type: 'delta', delta: notice.delta });
    }
  }

  private async received(entry: Open, msg: unknown): Promise<void> {
    const m = typeof msg === 'object' && msg !== null ? (msg as Record<string, unknown>) : {};
    if (m.type === 'ready') {
      // the whole view as it is now (changes may have come before the page was ready)
      const fresh = parseSearchView(await this.query('accelopt.searchView', [entry.reply.uri, entry.reply.kernel]));
      if (fresh?.view) {
        entry.reply = fresh;
      }
      entry.ready = true;
      void entry.panel.webview.postMessage({ type: 'view', view: entry.reply.view });
    } else if ((m.type === 'preview' || m.type === 'apply') && typeof m.candidateId === 'string') {
      try {
        await this.runAction(entry.reply, m.candidateId, m.type === 'preview');
      } catch (err) {
        const text = err instanceof Error ? err.message : String(err);
        this.log(`Search view: ${m.type} ${m.candidateId} failed: ${text}`);
        void vscode.window.showErrorMessage(`AccelOpt: ${m.type} failed: ${text}`);
      }
    }
  }

  /** Runs the server's code action of the candidate (its preview, or the edit itself). */
  private async runAction(reply: SearchViewReply, candidateId: string, preview: boolean): Promise<void> {
    const titles = reply.actions[candidateId];
    const gone = 'AccelOpt: this candidate is no longer offered (it is applied, or the kernel changed).';
    if (!titles) {
      void vscode.window.showWarningMessage(gone);
      return;
    }
    const wanted = preview ? titles.previewTitle : titles.title;
    const doc = await vscode.workspace.openTextDocument(vscode.Uri.parse(reply.uri));
    await vscode.window.showTextDocument(doc, { viewColumn: vscode.ViewColumn.One, preserveFocus: false });
    // what the lightbulb asks with the cursor on the kernel (its line from the server's lenses)
    const lenses = (await vscode.commands.executeCommand<vscode.CodeLens[]>('vscode.executeCodeLensProvider', doc.uri, 100)) ?? [];
    const line = kernelsFromLenses(lenses).find((k) => k.name === reply.kernel)?.line ?? 0;
    const at = new vscode.Selection(line, 0, line, 0);
    const actions =
      (await vscode.commands.executeCommand<vscode.CodeAction[]>('vscode.executeCodeActionProvider', doc.uri, at, undefined, 100)) ?? [];
    const action = actions.find((a) => a.title === wanted);
    if (!action) {
      this.log(`Search view: no code action "${wanted}" among ${JSON.stringify(actions.map((a) => a.title))}`);
      void vscode.window.showWarningMessage(gone);
      return;
    }
    this.log(`Search view: ${preview ? 'preview' : 'apply'} ${candidateId} (${wanted})`);
    if (action.edit) {
      // The API's copy of a code action drops the change annotations of its edit, so the
      // preview's "needs confirmation" (which opens the refactor preview) is set again here.
      const edit = preview ? confirmed(action.edit, wanted) : action.edit;
      const applied = await vscode.workspace.applyEdit(edit, { isRefactoring: true });
      this.log(`Search view: ${preview ? 'previewed' : 'applied'}: ${applied}`);
    } else if (!action.command) {
      void vscode.window.showWarningMessage(gone);
    }
    if (action.command) {
      await vscode.commands.executeCommand(action.command.command, ...(action.command.arguments ?? []));
    }
  }

  dispose(): void {
    for (const { panel } of [...this.open.values()]) {
      panel.dispose();
    }
    this.open.clear();
  }
}
