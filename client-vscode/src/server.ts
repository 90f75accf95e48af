/**
 * Starts, stops and restarts the AccelOpt language server (vscode-languageclient 9 over stdio)
 * and sends it commands. All decisions (interpreter, command line, environment, settings,
 * progress, result presentation) are made by the pure modules next to this one.
 */
import * as vscode from 'vscode';
import {
  ExecuteCommandRequest,
  LanguageClient,
  LanguageClientOptions,
  RevealOutputChannelOn,
  State,
  WorkDoneProgressCancelNotification,
} from 'vscode-languageclient/node';
import { effectiveTarget, notificationLevel, SECTION, SHOW_SETTINGS_COMMAND } from './config';
import { chooseInterpreter, InterpreterChoice } from './interpreter';
import { JobTracker } from './jobs';
import { ProgressNotifications } from './progress';
import { describeResult, Presentation, shouldNotify } from './results';
import { apiKeyEnvNames, describeKeySources, secretEnv } from './secrets';
import {
  executableOptions,
  installCommand,
  probeInterpreter,
  probeMessage,
  quoteArg,
  serverLaunch,
} from './serverProcess';
import { initialSettings, settingsMiddleware } from './settingsSync';
import { StatusBar } from './statusBar';

const SOURCE_TEXT: Record<InterpreterChoice['source'], string> = {
  setting: 'from accelopt.interpreter',
  'python-extension': "the Python extension's active environment",
  default: 'default; set accelopt.interpreter or select an interpreter in the Python extension',
};

/** Shows markdown (Show Memory); provided by the extension. */
export type MarkdownViewer = (title: string, markdown: string) => Promise<void>;

export class ServerManager implements vscode.Disposable {
  private client: LanguageClient | undefined;
  private queue: Promise<void> = Promise.resolve();
  private readonly progress: ProgressNotifications;
  /** The interpreter of the last start (the Python extension's env changes restart only then). */
  lastChoice: InterpreterChoice | undefined;
  /** Opens the search view of a kernel (issue 32): the "Show Search" lens runs it. */
  showSearch: ((uri: string, kernel: string) => Promise<void>) | undefined;
  /** Receives the server's `accelopt/searchView` notifications. */
  onSearchNotice: ((params: unknown) => void) | undefined;

  constructor(
    private readonly context: vscode.ExtensionContext,
    private readonly log: vscode.LogOutputChannel,
    private readonly status: StatusBar,
    readonly tracker: JobTracker,
    private readonly showMarkdown: MarkdownViewer,
    /** Key values handed to the server; `log` (a redactingChannel) hides them. */
    private readonly secretValues: Set<string>,
  ) {
    this.progress = new ProgressNotifications(
      tracker,
      (token) => void this.client?.sendNotification(WorkDoneProgressCancelNotification.type, { token }),
      (line) => this.log.info(line),
    );
  }

  /** True while the language client is running. */
  get running(): boolean {
    return this.client?.state === State.Running;
  }

  /** Starts the server (queued behind any start/stop in progress). */
  start(): Promise<void> {
    return this.enqueue(() => this.doStart());
  }

  /** Stops the server (queued). */
  stop(): Promise<void> {
    return this.enqueue(() => this.doStop());
  }

  /** Stops and starts the server, logging why. */
  restart(reason: string): Promise<void> {
    this.log.info(`Restarting the server: ${reason}`);
    return this.enqueue(async () => {
      await this.doStop();
      await this.doStart();
    });
  }

  /**
   * Sends `workspace/executeCommand` and shows its result (per accelopt.showNotifications).
   * Returns the result, or undefined when the server is down or the command failed (the user
   * was told why).
   */
  async execute(command: string, args: unknown[]): Promise<unknown> {
    const client = this.client;
    if (!client || client.state !== State.Running) {
      void this.notify(
        { kind: 'message', severity: 'error', text: 'AccelOpt: the server is not running (see AccelOpt: Show Logs).' },
        true,
      );
      return undefined;
    }
    return this.present(command, args, () =>
      client.sendRequest(ExecuteCommandRequest.type, { command, arguments: args }),
    );
  }

  /** Runs a server command quietly (no notification), for the client's own queries. */
  async query(command: string, args: unknown[]): Promise<unknown> {
    if (!this.client || this.client.state !== State.Running) {
      return undefined;
    }
    try {
      return await this.client.sendRequest(ExecuteCommandRequest.type, { command, arguments: args });
    } catch (err) {
      this.log.warn(`${command} failed: ${errorText(err)}`);
      return undefined;
    }
  }

  /**
   * Shows the target the server will use for the active Python file (else the server-wide
   * one): the editor settings over the project file and the user config, as the server merges
   * them (`accelopt.showSettings`). Keeps `accelopt.target` when the server cannot say.
   */
  async refreshTarget(): Promise<void> {
    const doc = vscode.window.activeTextEditor?.document;
    const args = doc?.languageId === 'python' ? [doc.uri.toString()] : [];
    const found = effectiveTarget(await this.query(SHOW_SETTINGS_COMMAND, args));
    if (found) {
      this.status.setTarget(found.target, found.source);
    }
  }

  private async present(command: string, args: unknown[], run: () => PromiseLike<unknown>): Promise<unknown> {
    let result: unknown;
    try {
      result = await run();
    } catch (err) {
      this.log.error(`${command} failed: ${errorText(err)}`);
      await this.notify({ kind: 'message', severity: 'error', text: `AccelOpt: ${command} failed: ${errorText(err)}` });
      return undefined;
    }
    await this.notify(describeResult(command, args, result));
    return result;
  }

  private async notify(p: Presentation, force = false): Promise<void> {
    if (!p) {
      return;
    }
    if (p.kind === 'markdown') {
      await this.showMarkdown(p.title, p.markdown);
      return;
    }
    this.log.info(p.text);
    const level = notificationLevel(vscode.workspace.getConfiguration(SECTION));
    if (!force && !shouldNotify(p.severity, level)) {
      return;
    }
    const show =
      p.severity === 'error'
        ? vscode.window.showErrorMessage
        : p.severity === 'warning'
          ? vscode.window.showWarningMessage
          : vscode.window.showInformationMessage;
    const choice = await show(p.text, ...(p.severity === 'info' ? [] : ['Show Logs']));
    if (choice === 'Show Logs') {
      this.log.show();
    }
  }

  private enqueue(step: () => Promise<void>): Promise<void> {
    const next = this.queue.then(step, step);
    this.queue = next.catch(() => undefined);
    return next;
  }

  private async doStart(): Promise<void> {
    if (this.client) {
      return;
    }
    this.status.setServer('starting');
    const resource = vscode.window.activeTextEditor?.document.uri;
    const folder =
      (resource && vscode.workspace.getWorkspaceFolder(resource)) || vscode.workspace.workspaceFolders?.[0];
    const choice = await chooseInterpreter(resource, (line) => this.log.warn(line));
    this.lastChoice = choice;
    this.log.info(`Interpreter: ${choice.command.join(' ')} (${SOURCE_TEXT[choice.source]})`);
    const probe = await probeInterpreter(choice.command);
    if (!probe.ok) {
      const message = probeMessage(probe, choice.command);
      this.log.error(`${message}\n${probe.detail}`);
      this.status.setServer(probe.reason === 'missing-module' ? 'not-installed' : 'failed', message);
      void this.offerFix(message, probe.reason === 'missing-module' || probe.reason === 'failed' ? choice.command : undefined);
      return;
    }
    this.log.info(`Python ${probe.version} at ${probe.executable}`);

    const config = vscode.workspace.getConfiguration(SECTION, folder?.uri);
    const { env: keys, sources } = await secretEnv(this.context.secrets, apiKeyEnvNames(config), process.env);
    this.secretValues.clear();
    for (const [name, source] of Object.entries(sources)) {
      const value = source === 'secret-storage' ? keys[name] : process.env[name];
      if (value) {
        this.secretValues.add(value);
      }
    }
    for (const line of describeKeySources(sources)) {
      this.log.info(line);
    }
    const launch = serverLaunch(choice.command, process.env, keys, folder?.uri.fsPath);
    this.log.info(`Starting the server: ${[launch.command, ...launch.args].map((a) => quoteArg(a)).join(' ')}`);

    const clientOptions: LanguageClientOptions = {
      documentSelector: [
        { scheme: 'file', language: 'python' },
        { scheme: 'untitled', language: 'python' },
      ],
      outputChannel: this.log,
      traceOutputChannel: this.log,
      revealOutputChannelOn: RevealOutputChannelOn.Never,
      // Only what the user set goes to the server, so the project file and user config apply.
      initializationOptions: () => initialSettings(),
      synchronize: { configurationSection: SECTION },
      middleware: {
        workspace: settingsMiddleware(),
        handleWorkDoneProgress: (token, params, next) => this.progress.handle(token, params, () => next(token, params)),
        executeCommand: (command, args, next) =>
          // the lens's accelopt.showSearch writes an HTML file for editors without webviews;
          // here it opens the webview instead
          command === 'accelopt.showSearch' && this.showSearch && typeof args[1] === 'string'
            ? this.showSearch(String(args[0]), args[1])
            : this.present(command, args, () => next(command, args)),
      },
    };
    const client = new LanguageClient(SECTION, 'AccelOpt', executableOptions(launch), clientOptions);
    this.client = client;
    client.onDidChangeState((e) => {
      if (e.newState === State.Running) {
        this.status.setServer('running');
      } else if (e.newState === State.Starting) {
        this.status.setServer('starting');
      } else if (e.newState === State.Stopped) {
        this.tracker.clear();
        this.progress.dispose();
        if (this.client === client) {
          this.status.setServer('failed', 'The AccelOpt server stopped. See AccelOpt: Show Logs.');
        }
      }
    });
    client.onNotification('accelopt/searchView', (params: unknown) => this.onSearchNotice?.(params));
    try {
      await client.start();
      this.status.setTarget(config.get<string>('target') ?? 'local');
      this.status.setServer('running');
      this.log.info('The server is running.');
      await this.refreshTarget();
    } catch (err) {
      this.log.error(`The server did not start: ${errorText(err)}`);
      this.status.setServer('failed', `The AccelOpt server did not start: ${errorText(err)}`);
      this.client = undefined;
      await client.dispose().catch(() => undefined);
      void this.notify(
        { kind: 'message', severity: 'error', text: `AccelOpt: the server did not start: ${errorText(err)}` },
        true,
      );
    }
  }

  private async doStop(): Promise<void> {
    const client = this.client;
    this.client = undefined;
    this.tracker.clear();
    this.progress.dispose();
    if (client) {
      try {
        await client.dispose(5000);
      } catch (err) {
        this.log.warn(`Stopping the server: ${errorText(err)}`);
      }
    }
    this.status.setServer('stopped');
  }

  private async offerFix(message: string, interpreter: string[] | undefined): Promise<void> {
    const actions = interpreter ? ['Copy Install Command', 'Set Interpreter', 'Show Logs'] : ['Set Interpreter', 'Show Logs'];
    const choice = await vscode.window.showErrorMessage(message, ...actions);
    if (choice === 'Copy Install Command' && interpreter) {
      await vscode.env.clipboard.writeText(installCommand(interpreter));
    } else if (choice === 'Set Interpreter') {
      await vscode.commands.executeCommand('workbench.action.openSettings', `${SECTION}.interpreter`);
    } else if (choice === 'Show Logs') {
      this.log.show();
    }
  }

  dispose(): void {
    void this.stop();
  }
}

/** The message of an error (ResponseError, Error or anything else). */
export function errorText(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}
