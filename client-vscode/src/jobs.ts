/**
 * Running searches as the client sees them: live state from the server's work-done progress
 * ($/progress begin / report / end) and the authoritative list from `accelopt.listJobs`.
 * Pure (no `vscode` import); the status bar and the progress notifications render it.
 */

/** Title prefix of the server's progress ("AccelOpt: optimizing softmax_kernel"). */
export const PROGRESS_PREFIX = 'AccelOpt:';

/** One active work-done progress of the server. `percentage` is 0..100. */
export interface ActiveProgress {
  token: string;
  title: string;
  message?: string;
  percentage?: number;
  cancellable: boolean;
}

/** $/progress values (LSP WorkDoneProgressBegin / Report / End). */
export type ProgressValue =
  | { kind: 'begin'; title: string; message?: string; percentage?: number; cancellable?: boolean }
  | { kind: 'report'; message?: string; percentage?: number; cancellable?: boolean }
  | { kind: 'end'; message?: string };

/** True for a progress title the server's AccelOpt work uses. */
export function isAccelOptTitle(title: string): boolean {
  return title.startsWith(PROGRESS_PREFIX);
}

/** Live progress of the server, keyed by progress token; notifies listeners on every change. */
export class JobTracker {
  private readonly active = new Map<string, ActiveProgress>();
  private readonly listeners = new Set<() => void>();

  /** Registers a change listener; returns a function that removes it. */
  onChange(listener: () => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** Applies one $/progress value. Only titles starting with "AccelOpt:" are tracked. */
  apply(token: string | number, value: ProgressValue): void {
    const key = String(token);
    if (value.kind === 'begin') {
      if (!isAccelOptTitle(value.title)) {
        return;
      }
      this.active.set(key, {
        token: key,
        title: value.title,
        message: value.message,
        percentage: value.percentage,
        cancellable: value.cancellable ?? false,
      });
    } else if (value.kind === 'report') {
      const current = this.active.get(key);
      if (!current) {
        return;
      }
      if (value.message !== undefined) {
        current.message = value.message;
      }
      if (value.percentage !== undefined) {
        current.percentage = value.percentage;
      }
      if (value.cancellable !== undefined) {
        current.cancellable = value.cancellable;
      }
    } else if (!this.active.delete(key)) {
      return;
    }
    this.emit();
  }

  /** Forgets everything (the server stopped). */
  clear(): void {
    if (this.active.size) {
      this.active.clear();
      this.emit();
    }
  }

  /** Active progress in start order. */
  list(): ActiveProgress[] {
    return [...this.active.values()];
  }

  private emit(): void {
    for (const listener of this.listeners) {
      listener();
    }
  }
}

/** One search as reported by `accelopt.listJobs`. `bestSpeedup` is baseline/best latency. */
export interface JobInfo {
  jobId: string;
  uri: string;
  kernel: string;
  state: string;
  iteration?: number;
  iterations?: number;
  bestSpeedup?: number | null;
}

/** Validates the reply of `accelopt.listJobs`; entries without jobId/kernel are dropped. */
export function parseJobs(value: unknown): JobInfo[] {
  if (!Array.isArray(value)) {
    return [];
  }
  const out: JobInfo[] = [];
  for (const item of value) {
    if (typeof item !== 'object' || item === null) {
      continue;
    }
    const o = item as Record<string, unknown>;
    if ((typeof o.jobId !== 'string' && typeof o.jobId !== 'number') || typeof o.kernel !== 'string') {
      continue;
    }
    const num = (v: unknown) => (typeof v === 'number' && Number.isFinite(v) ? v : undefined);
    out.push({
      jobId: String(o.jobId),
      uri: typeof o.uri === 'string' ? o.uri : '',
      kernel: o.kernel,
      state: typeof o.state === 'string' ? o.state : 'unknown',
      iteration: num(o.iteration),
      iterations: num(o.iterations),
      bestSpeedup: num(o.bestSpeedup) ?? null,
    });
  }
  return out;
}

/** True for a job that can still be cancelled. */
export function isRunning(job: JobInfo): boolean {
  return ['running', 'queued', 'pending', 'starting'].includes(job.state);
}

/** Quick-pick label and description of a job: "softmax_kernel", "running · iteration 2/4 · best 1.80x". */
export function jobLabel(job: JobInfo): { label: string; description: string; detail: string } {
  const parts = [job.state];
  if (job.iteration !== undefined && job.iterations !== undefined) {
    parts.push(`iteration ${job.iteration}/${job.iterations}`);
  }
  if (typeof job.bestSpeedup === 'number') {
    parts.push(`best ${job.bestSpeedup.toFixed(2)}x`);
  }
  const file = job.uri.split('/').pop() ?? job.uri;
  return { label: job.kernel, description: parts.join(' · '), detail: file ? decodeURIComponent(file) : '' };
}

/** The server's state as the status bar shows it. */
export type ServerState = 'starting' | 'running' | 'stopped' | 'failed' | 'not-installed';

/** Text (with codicons) and tooltip of the status bar item. */
export function statusView(
  target: string,
  server: ServerState,
  active: ActiveProgress[],
  detail?: string,
  targetSource?: string,
): { text: string; tooltip: string; warning: boolean } {
  if (server === 'not-installed' || server === 'failed') {
    return {
      text: '$(warning) AccelOpt',
      tooltip: detail ?? 'The AccelOpt server is not running. Click for the logs.',
      warning: true,
    };
  }
  if (server === 'starting') {
    return { text: '$(loading~spin) AccelOpt', tooltip: 'Starting the AccelOpt server…', warning: false };
  }
  if (server === 'stopped') {
    return { text: '$(circle-slash) AccelOpt', tooltip: 'The AccelOpt server is stopped.', warning: false };
  }
  const lines = active.map((p) => {
    const what = p.title.slice(PROGRESS_PREFIX.length).trim();
    return p.message ? `${what} — ${p.message}` : what;
  });
  const from = targetSource && targetSource !== 'default' ? ` (from the ${targetSource})` : '';
  const tooltip = [`AccelOpt target: ${target}${from}`, ...lines, active.length ? 'Click to list or cancel searches.' : 'No running searches. Click to list searches.'].join('\n');
  if (active.length === 0) {
    return { text: `$(zap) AccelOpt: ${target}`, tooltip, warning: false };
  }
  if (active.length === 1) {
    return { text: `$(sync~spin) AccelOpt: ${lines[0]}`, tooltip, warning: false };
  }
  return { text: `$(sync~spin) AccelOpt: ${active.length} running`, tooltip, warning: false };
}
