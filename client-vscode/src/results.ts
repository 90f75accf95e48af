/**
 * How the result of a server command (workspace/executeCommand) is shown to the user. Pure
 * (no `vscode` import); the contract of each command is the server's (see README).
 */
import type { NotificationLevel } from './config';

/** What to show for one command result. */
export type Presentation =
  | { kind: 'message'; severity: 'info' | 'warning' | 'error'; text: string }
  | { kind: 'markdown'; title: string; markdown: string }
  | undefined;

function obj(value: unknown): Record<string, unknown> {
  return typeof value === 'object' && value !== null ? (value as Record<string, unknown>) : {};
}

/** A latency in ms with 3 significant digits ("0.0123 ms", "1.23 ms", "123 ms"). */
export function formatMs(ms: number): string {
  return `${ms >= 100 ? ms.toFixed(0) : ms.toPrecision(3)} ms`;
}

/** The presentation of `result`, the reply of server command `command` called with `args`. */
export function describeResult(command: string, args: unknown[], result: unknown): Presentation {
  const r = obj(result);
  const kernel = typeof args[1] === 'string' ? args[1] : undefined;
  switch (command) {
    case 'accelopt.optimize':
      if (r.started === true) {
        return { kind: 'message', severity: 'info', text: `AccelOpt: optimizing ${kernel ?? 'the kernel'} (job ${String(r.jobId)}).` };
      }
      return {
        kind: 'message',
        severity: 'warning',
        text: `AccelOpt: the search did not start${typeof r.message === 'string' ? `: ${r.message}` : '.'}`,
      };
    case 'accelopt.cancel':
      return r.cancelled === true
        ? { kind: 'message', severity: 'info', text: 'AccelOpt: search cancelled.' }
        : {
            kind: 'message',
            severity: 'warning',
            text: `AccelOpt: nothing to cancel${typeof r.message === 'string' ? ` (${r.message})` : ' (the search already ended)'}.`,
          };
    case 'accelopt.profile': {
      const kernels = obj(r.kernels);
      const names = Object.keys(kernels);
      if (!names.length) {
        return { kind: 'message', severity: 'warning', text: 'AccelOpt: no kernel with a harness was profiled.' };
      }
      let failed = false;
      const parts = names.map((name) => {
        const k = obj(kernels[name]);
        if (k.status !== 'ok') {
          failed = true;
        }
        if (typeof k.summary === 'string' && k.summary) {
          return `${name}: ${k.summary}`;
        }
        const ms = typeof k.latencyMs === 'number' ? k.latencyMs : k.latency_ms;
        const latency = typeof ms === 'number' ? ` ${formatMs(ms)}` : '';
        return `${name}: ${String(k.status ?? 'unknown')}${latency}`;
      });
      return { kind: 'message', severity: failed ? 'warning' : 'info', text: `AccelOpt: ${parts.join('; ')}` };
    }
    case 'accelopt.showMemory':
      if (typeof result === 'string') {
        return { kind: 'markdown', title: `AccelOpt memory${kernel ? ` — ${kernel}` : ''}`, markdown: result };
      }
      return { kind: 'message', severity: 'warning', text: 'AccelOpt: the server returned no memory to show.' };
    case 'accelopt.clearResults': {
      const n = r.cleared;
      const what = typeof n === 'number' ? `${n} result${n === 1 ? '' : 's'}` : 'results';
      return { kind: 'message', severity: 'info', text: `AccelOpt: cleared ${what}.` };
    }
    default:
      return undefined;
  }
}

/** Whether a message of `severity` shows under `accelopt.showNotifications` = `level`. */
export function shouldNotify(severity: 'info' | 'warning' | 'error', level: NotificationLevel): boolean {
  if (severity === 'error') {
    return true;
  }
  if (severity === 'warning') {
    return level !== 'off';
  }
  return level === 'always';
}
