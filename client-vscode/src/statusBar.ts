/**
 * The AccelOpt status bar item: the target and the running searches, following the server's
 * work-done progress through the JobTracker. Click: list searches (and cancel one); when the
 * server is not running, click shows the logs.
 */
import * as vscode from 'vscode';
import { JobTracker, ServerState, statusView } from './jobs';

/** Command run when the item is clicked while the server runs. */
export const JOBS_COMMAND = 'accelopt.showJobs';
/** Command run when the item is clicked while the server is down. */
export const LOGS_COMMAND = 'accelopt.showLogs';

export class StatusBar implements vscode.Disposable {
  readonly item: vscode.StatusBarItem;
  private server: ServerState = 'stopped';
  private detail?: string;
  private target = 'local';
  private targetSource?: string;
  private readonly unsubscribe: () => void;

  constructor(private readonly tracker: JobTracker) {
    this.item = vscode.window.createStatusBarItem('accelopt.status', vscode.StatusBarAlignment.Left, 50);
    this.item.name = 'AccelOpt';
    this.unsubscribe = tracker.onChange(() => this.render());
    this.render();
    this.item.show();
  }

  /** Sets the server state; `detail` is the tooltip for a failed start. */
  setServer(state: ServerState, detail?: string): void {
    this.server = state;
    this.detail = detail;
    this.render();
  }

  /**
   * Sets the target shown while idle: the server's effective target with the layer that set it
   * (`project file /ws/pyproject.toml`), or `accelopt.target` before the server has answered.
   */
  setTarget(target: string, source?: string): void {
    this.target = target || 'local';
    this.targetSource = source;
    this.render();
  }

  /** Redraws the item from the current state. */
  render(): void {
    const view = statusView(this.target, this.server, this.tracker.list(), this.detail, this.targetSource);
    this.item.text = view.text;
    this.item.tooltip = view.tooltip;
    this.item.backgroundColor = view.warning ? new vscode.ThemeColor('statusBarItem.warningBackground') : undefined;
    this.item.command = this.server === 'running' ? JOBS_COMMAND : LOGS_COMMAND;
  }

  dispose(): void {
    this.unsubscribe();
    this.item.dispose();
  }
}
