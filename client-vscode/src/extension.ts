/**
 * Entry point of the AccelOpt extension: wires the log channel, status bar, server manager,
 * commands and restart triggers together. Logic lives in the modules it imports.
 */
import * as vscode from 'vscode';
import { Debouncer, isSettingsFile, restartTrigger, SECTION, SETTINGS_FILES } from './config';
import { pythonExtensionApi } from './interpreter';
import { isRunning, JobTracker, jobLabel, parseJobs } from './jobs';
import { kernelAt, KernelRef, kernelsFromLenses } from './kernels';
import { apiKeyEnvNames, redactingChannel, setApiKey } from './secrets';
import { SearchPanels } from './searchPanel';
import { ServerManager } from './server';
import { StatusBar } from './statusBar';

const MEMORY_SCHEME = 'accelopt-memory';
let manager: ServerManager | undefined;

/** Read-only markdown documents for Show Memory, rendered with VS Code's markdown preview. */
class MemoryDocuments implements vscode.TextDocumentContentProvider {
  private readonly docs = new Map<string, string>();
  private readonly changed = new vscode.EventEmitter<vscode.Uri>();
  readonly onDidChange = this.changed.event;

  provideTextDocumentContent(uri: vscode.Uri): string {
    return this.docs.get(uri.toString()) ?? '';
  }

  async show(title: string, markdown: string): Promise<void> {
    const uri = vscode.Uri.from({ scheme: MEMORY_SCHEME, path: `/${title.replace(/[\\/]/g, '_')}.md` });
    this.docs.set(uri.toString(), markdown);
    this.changed.fire(uri);
    try {
      await vscode.commands.executeCommand('markdown.showPreview', uri);
    } catch {
      const doc = await vscode.workspace.openTextDocument(uri);
      await vscode.window.showTextDocument(doc, { preview: true });
    }
  }
}

/** The kernel a command acts on: given arguments, else the one at the cursor, else a pick. */
async function resolveKernel(uriArg: unknown, kernelArg: unknown, required: boolean): Promise<{ uri: string; kernel?: string } | undefined> {
  if (typeof kernelArg === 'string' && uriArg !== undefined) {
    return { uri: String(uriArg), kernel: kernelArg };
  }
  const editor = vscode.window.activeTextEditor;
  if (!editor || editor.document.languageId !== 'python') {
    void vscode.window.showWarningMessage('AccelOpt: open a Python file with a @triton.jit or @nki.jit kernel first.');
    return undefined;
  }
  const uri = editor.document.uri.toString();
  const lenses =
    (await vscode.commands.executeCommand<vscode.CodeLens[]>('vscode.executeCodeLensProvider', editor.document.uri, 100)) ?? [];
  const kernels = kernelsFromLenses(lenses);
  if (!kernels.length) {
    if (!required) {
      return { uri };
    }
    void vscode.window.showWarningMessage(
      'AccelOpt: no kernel to act on in this file. The server puts Profile / Optimize code lenses above each ' +
        '@triton.jit / @nki.jit kernel of a file with a benchmark harness (a kernel without one offers a code ' +
        'action to insert it); a kernel that is being optimized shows Cancel instead.',
    );
    return undefined;
  }
  const atCursor = kernelAt(kernels, editor.selection.active.line);
  if (atCursor) {
    return { uri: atCursor.uri, kernel: atCursor.name };
  }
  if (!required) {
    return { uri };
  }
  const pick = await vscode.window.showQuickPick(
    kernels.map((k: KernelRef) => ({ label: k.name, description: `line ${k.line + 1}`, kernel: k })),
    { placeHolder: 'Which kernel?' },
  );
  return pick ? { uri: pick.kernel.uri, kernel: pick.kernel.name } : undefined;
}

/** Lists the server's searches; picking a running one cancels it. */
async function showJobs(server: ServerManager): Promise<void> {
  const jobs = parseJobs(await server.query('accelopt.listJobs', []));
  if (!jobs.length) {
    void vscode.window.showInformationMessage('AccelOpt: no searches.');
    return;
  }
  const items = jobs.map((job) => {
    const view = jobLabel(job);
    const running = isRunning(job);
    return { ...view, label: `${running ? '$(debug-stop)' : '$(check)'} ${view.label}`, job, running };
  });
  const pick = await vscode.window.showQuickPick(items, {
    placeHolder: 'Searches — pick a running one to cancel it',
    matchOnDescription: true,
  });
  if (!pick) {
    return;
  }
  if (pick.running) {
    await server.execute('accelopt.cancel', [pick.job.jobId]);
  } else if (pick.job.uri) {
    await vscode.window.showTextDocument(vscode.Uri.parse(pick.job.uri));
  }
}

export async function activate(context: vscode.ExtensionContext): Promise<void> {
  const secretValues = new Set<string>();
  const log = redactingChannel(vscode.window.createOutputChannel('AccelOpt', { log: true }), () => secretValues);
  const tracker = new JobTracker();
  const status = new StatusBar(tracker);
  const memory = new MemoryDocuments();
  const server = new ServerManager(context, log, status, tracker, (title, md) => memory.show(title, md), secretValues);
  manager = server;
  status.setTarget(vscode.workspace.getConfiguration(SECTION).get<string>('target') ?? 'local');
  const restarts = new Debouncer(500, (reasons) => void server.restart(`${reasons.join(', ')} changed`));
  // The status bar shows the server's effective target (the project file may set it).
  const targetRefresh = new Debouncer(300, () => void server.refreshTarget());
  const settingsFiles = vscode.workspace.createFileSystemWatcher(`**/{${SETTINGS_FILES.join(',')}}`);
  for (const event of [settingsFiles.onDidChange, settingsFiles.onDidCreate, settingsFiles.onDidDelete]) {
    context.subscriptions.push(event(() => targetRefresh.trigger('settings file')));
  }
  context.subscriptions.push(
    settingsFiles,
    { dispose: () => targetRefresh.dispose() },
    vscode.workspace.onDidSaveTextDocument((doc) => {
      if (isSettingsFile(doc.uri.path)) {
        targetRefresh.trigger('settings file');
      }
    }),
    vscode.window.onDidChangeActiveTextEditor(() => targetRefresh.trigger('editor')),
  );

  const register = (id: string, fn: (...args: unknown[]) => unknown) =>
    context.subscriptions.push(vscode.commands.registerCommand(id, fn));

  register('accelopt.optimizeKernel', async (uri, kernel) => {
    const target = await resolveKernel(uri, kernel, true);
    if (target?.kernel) {
      await server.execute('accelopt.optimize', [target.uri, target.kernel]);
    }
  });
  register('accelopt.profileKernel', async (uri, kernel) => {
    const target = await resolveKernel(uri, kernel, false);
    if (target) {
      await server.execute('accelopt.profile', target.kernel ? [target.uri, target.kernel] : [target.uri]);
    }
  });
  register('accelopt.openMemory', async (uri, kernel) => {
    const target = await resolveKernel(uri, kernel, true);
    if (target?.kernel) {
      await server.execute('accelopt.showMemory', [target.uri, target.kernel]);
    }
  });
  register('accelopt.clearFileResults', async (uri) => {
    if (uri !== undefined) {
      await server.execute('accelopt.clearResults', [String(uri)]);
      return;
    }
    const editor = vscode.window.activeTextEditor;
    let args: unknown[] = [];
    if (editor?.document.languageId === 'python') {
      const pick = await vscode.window.showQuickPick(['This file', 'All files'], { placeHolder: 'Clear AccelOpt results of…' });
      if (!pick) {
        return;
      }
      args = pick === 'This file' ? [editor.document.uri.toString()] : [];
    }
    await server.execute('accelopt.clearResults', args);
  });
  const panels = new SearchPanels(
    (command, args) => server.query(command, args),
    (line) => log.info(line),
  );
  server.showSearch = (uri, kernel) => panels.show(uri, kernel);
  server.onSearchNotice = (params) => void panels.notified(params);
  context.subscriptions.push(panels);
  register('accelopt.showSearchView', async (uri, kernel) => {
    const target = await resolveKernel(uri, kernel, true);
    if (target?.kernel) {
      await panels.show(target.uri, target.kernel);
    }
  });
  register('accelopt.cancelOptimization', () => showJobs(server));
  register('accelopt.showJobs', () => showJobs(server));
  register('accelopt.restartServer', () => server.restart('AccelOpt: Restart Server'));
  register('accelopt.showLogs', () => log.show());
  register('accelopt.setApiKey', async () => {
    const outcome = await setApiKey(
      context.secrets,
      apiKeyEnvNames(vscode.workspace.getConfiguration(SECTION)),
      {
        pickName: (names) => vscode.window.showQuickPick(names, { placeHolder: 'Which API key variable?' }),
        askKey: (name) =>
          vscode.window.showInputBox({
            password: true,
            ignoreFocusOut: true,
            prompt: `API key for ${name}: stored in VS Code SecretStorage and passed to the server as $${name}. Leave empty to remove it.`,
          }),
      },
      (line) => log.info(line),
    );
    if (outcome.action !== 'dismissed') {
      await server.restart(`API key ${outcome.name} ${outcome.action}`);
    }
  });

  context.subscriptions.push(
    log,
    status,
    server,
    { dispose: () => restarts.dispose() },
    vscode.workspace.registerTextDocumentContentProvider(MEMORY_SCHEME, memory),
    vscode.workspace.onDidChangeConfiguration((e) => {
      if (e.affectsConfiguration(`${SECTION}.target`)) {
        status.setTarget(vscode.workspace.getConfiguration(SECTION).get<string>('target') ?? 'local');
      }
      targetRefresh.trigger('settings');
      const trigger = restartTrigger(e);
      if (trigger) {
        restarts.trigger(trigger);
      }
    }),
  );

  const python = await pythonExtensionApi((line) => log.warn(line));
  if (python) {
    context.subscriptions.push(
      python.environments.onDidChangeActiveEnvironmentPath(() => {
        if (server.lastChoice?.source === 'python-extension') {
          restarts.trigger("the Python extension's active environment");
        }
      }),
    );
  }
  await server.start();
}

export async function deactivate(): Promise<void> {
  await manager?.stop();
  manager = undefined;
}
