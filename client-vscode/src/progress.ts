/**
 * Shows the server's work-done progress as VS Code notifications with a Cancel button.
 *
 * vscode-languageclient 9 renders server-initiated progress (ProgressPart) with
 * `ProgressLocation.Window`: a status-bar spinner without a Cancel button, even when the server
 * marks it `cancellable`. For AccelOpt progress ("AccelOpt: ..." titles) this middleware shows
 * a `ProgressLocation.Notification` instead, reports message and percentage to it, and on Cancel
 * sends `window/workDoneProgress/cancel` for the token. Other progress passes through unchanged.
 * Every value also updates the JobTracker (status bar).
 */
import * as vscode from 'vscode';
import { isAccelOptTitle, JobTracker, ProgressValue } from './jobs';

type Token = string | number;

interface OpenNotification {
  progress?: vscode.Progress<{ message?: string; increment?: number }>;
  resolve?: () => void;
  reported: number;
  finished: boolean;
  pending?: { message?: string; percentage?: number };
}

/** The middleware behind `middleware.handleWorkDoneProgress`. */
export class ProgressNotifications {
  private readonly open = new Map<string, OpenNotification>();

  constructor(
    private readonly tracker: JobTracker,
    private readonly sendCancel: (token: Token) => void,
    private readonly log: (line: string) => void = () => undefined,
  ) {}

  /** `(token, value, next)` as vscode-languageclient's handleWorkDoneProgress middleware. */
  readonly handle = (token: Token, value: ProgressValue, next: () => void): void => {
    this.tracker.apply(token, value);
    const key = String(token);
    if (value.kind === 'begin' && isAccelOptTitle(value.title) && !this.open.has(key)) {
      this.show(token, value);
      return;
    }
    const open = this.open.get(key);
    if (!open) {
      next();
      return;
    }
    if (value.kind === 'report') {
      this.report(open, value);
    } else if (value.kind === 'end') {
      this.finish(key);
      // Let the client's own ProgressPart for this token see the end and dispose itself.
      next();
    }
  };

  /** Closes every open notification (the server stopped). */
  dispose(): void {
    for (const key of [...this.open.keys()]) {
      this.finish(key);
    }
  }

  private show(token: Token, value: Extract<ProgressValue, { kind: 'begin' }>): void {
    const key = String(token);
    const state: OpenNotification = { reported: 0, finished: false };
    this.open.set(key, state);
    void vscode.window.withProgress(
      {
        location: vscode.ProgressLocation.Notification,
        title: value.title,
        cancellable: value.cancellable ?? false,
      },
      (progress, cancel) =>
        new Promise<void>((resolve) => {
          state.progress = progress;
          state.resolve = resolve;
          if (state.finished) {
            resolve();
            return;
          }
          cancel.onCancellationRequested(() => {
            this.log(`Cancel requested for "${value.title}" (progress token ${key}).`);
            this.sendCancel(token);
          });
          this.report(state, { kind: 'report', message: value.message, percentage: value.percentage });
          if (state.pending) {
            this.report(state, { kind: 'report', ...state.pending });
            state.pending = undefined;
          }
        }),
    );
  }

  private report(state: OpenNotification, value: Extract<ProgressValue, { kind: 'report' }>): void {
    if (!state.progress) {
      state.pending = { ...state.pending, ...value };
      return;
    }
    let increment: number | undefined;
    if (typeof value.percentage === 'number') {
      const pct = Math.max(0, Math.min(100, value.percentage));
      increment = Math.max(0, pct - state.reported);
      state.reported += increment;
    }
    if (value.message !== undefined || increment) {
      state.progress.report({ message: value.message, increment });
    }
  }

  private finish(key: string): void {
    const state = this.open.get(key);
    if (!state) {
      return;
    }
    this.open.delete(key);
    state.finished = true;
    state.resolve?.();
  }
}
