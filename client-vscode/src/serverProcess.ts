/**
 * The server's command line and the check that an interpreter can run it.
 *
 * Node only (no `vscode` import): the unit tests and the end-to-end test use exactly these
 * functions, so the command line they start is the one the extension starts.
 */
import { execFile } from 'node:child_process';

/** The Python package of the language server (`python -m accelopt_server`). */
export const SERVER_MODULE = 'accelopt_server';
/** The pip requirement that provides it. */
export const PIP_REQUIREMENT = 'accelopt[triton]';
/** Oldest Python the server supports (pyproject.toml requires-python). */
export const MIN_PYTHON: [number, number] = [3, 10];

/** How to start the server: executable, arguments and the full environment. */
export interface ServerLaunch {
  command: string;
  args: string[];
  env: Record<string, string>;
  cwd?: string;
}

/**
 * The server command line for an interpreter argv prefix: `[...interpreter, '-m',
 * 'accelopt_server']` over stdio. `env` is `baseEnv` plus `PYTHONUNBUFFERED=1` plus `extraEnv`
 * (API keys); `baseEnv` is not modified. Throws on an empty interpreter.
 */
export function serverLaunch(
  interpreter: string[],
  baseEnv: Record<string, string | undefined>,
  extraEnv: Record<string, string> = {},
  cwd?: string,
): ServerLaunch {
  if (interpreter.length === 0 || !interpreter[0]) {
    throw new Error('empty interpreter');
  }
  const env: Record<string, string> = {};
  for (const [k, v] of Object.entries(baseEnv)) {
    if (v !== undefined) {
      env[k] = v;
    }
  }
  env.PYTHONUNBUFFERED = '1';
  Object.assign(env, extraEnv);
  return {
    command: interpreter[0],
    args: [...interpreter.slice(1), '-m', SERVER_MODULE],
    env,
    cwd,
  };
}

/** Quotes one argument for display in a shell command (POSIX or Windows). */
export function quoteArg(arg: string, platform: string = process.platform): string {
  if (/^[\w@%+=:,./\\-]+$/.test(arg)) {
    return arg;
  }
  if (platform === 'win32') {
    return `"${arg.replace(/"/g, '\\"')}"`;
  }
  return `'${arg.replace(/'/g, `'\\''`)}'`;
}

/** The exact command that installs the server into `interpreter`. */
export function installCommand(interpreter: string[], platform: string = process.platform): string {
  const py = interpreter.map((a) => quoteArg(a, platform)).join(' ');
  return `${py} -m pip install "${PIP_REQUIREMENT}"`;
}

/** The outcome of probing an interpreter. */
export type Probe =
  | { ok: true; executable: string; version: string }
  | {
      ok: false;
      reason: 'not-found' | 'too-old' | 'missing-module' | 'failed';
      executable?: string;
      version?: string;
      detail: string;
    };

const PROBE_CODE = `
import json, sys
info = {"executable": sys.executable, "version": "%d.%d.%d" % sys.version_info[:3]}
if sys.version_info[:2] >= (${MIN_PYTHON[0]}, ${MIN_PYTHON[1]}):
    try:
        __import__(sys.argv[1])
        info["found"] = True
    except ModuleNotFoundError as exc:
        info.update(found=False, missing=exc.name, error="%s: %s" % (type(exc).__name__, exc))
    except Exception as exc:
        info.update(found=False, missing=None, error="%s: %s" % (type(exc).__name__, exc))
sys.stdout.write("\\n" + json.dumps(info) + "\\n")
`;

/**
 * Runs `interpreter -c <probe> module` (asynchronously, at most `timeoutMs` ms) to learn the
 * interpreter's executable and version and whether `import module` works. A module that is
 * absent gives `missing-module`; one that is present but fails to import (a missing
 * dependency, a syntax error) gives `failed` with the exception. Never throws.
 */
export function probeInterpreter(
  interpreter: string[],
  module: string = SERVER_MODULE,
  timeoutMs = 30000,
): Promise<Probe> {
  return new Promise((resolve) => {
    execFile(
      interpreter[0],
      [...interpreter.slice(1), '-c', PROBE_CODE, module],
      { timeout: timeoutMs, windowsHide: true },
      (error, stdout, stderr) => {
        if (error && (error as NodeJS.ErrnoException).code === 'ENOENT') {
          resolve({ ok: false, reason: 'not-found', detail: `${interpreter[0]}: not found` });
          return;
        }
        let info:
          | { executable: string; version: string; found?: boolean; missing?: string | null; error?: string }
          | undefined;
        try {
          info = JSON.parse(stdout.trim().split('\n').pop() ?? '');
        } catch {
          info = undefined;
        }
        if (!info) {
          const why = error?.killed ? `timed out after ${timeoutMs} ms` : String(stderr || error?.message || stdout).trim();
          resolve({ ok: false, reason: 'failed', detail: why });
          return;
        }
        const [major, minor] = info.version.split('.').map(Number);
        if (major < MIN_PYTHON[0] || (major === MIN_PYTHON[0] && minor < MIN_PYTHON[1])) {
          resolve({
            ok: false,
            reason: 'too-old',
            executable: info.executable,
            version: info.version,
            detail: `Python ${info.version} is older than ${MIN_PYTHON.join('.')}`,
          });
        } else if (!info.found && info.missing !== module && !module.startsWith(`${info.missing}.`)) {
          resolve({
            ok: false,
            reason: 'failed',
            executable: info.executable,
            version: info.version,
            detail: `import ${module} failed: ${info.error ?? 'unknown error'}`,
          });
        } else if (!info.found) {
          resolve({
            ok: false,
            reason: 'missing-module',
            executable: info.executable,
            version: info.version,
            detail: `No module named '${module}'`,
          });
        } else {
          resolve({ ok: true, executable: info.executable, version: info.version });
        }
      },
    );
  });
}

/** The message shown to the user when the probe failed (one line, actionable). */
export function probeMessage(probe: Exclude<Probe, { ok: true }>, interpreter: string[]): string {
  const shown = interpreter.join(' ');
  switch (probe.reason) {
    case 'not-found':
      return (
        `AccelOpt: the Python interpreter "${shown}" was not found. Set accelopt.interpreter ` +
        `or select an interpreter with the Python extension.`
      );
    case 'too-old':
      return (
        `AccelOpt: "${shown}" is Python ${probe.version}; the server needs Python ` +
        `${MIN_PYTHON.join('.')} or newer. Set accelopt.interpreter to a newer interpreter.`
      );
    case 'missing-module':
      return (
        `AccelOpt: the interpreter "${shown}" does not have the AccelOpt server installed. ` +
        `Install it with: ${installCommand(interpreter)}`
      );
    default:
      return (
        `AccelOpt: could not start the server with "${shown}": ${probe.detail}. ` +
        `Reinstalling may help: ${installCommand(interpreter)}`
      );
  }
}

/**
 * vscode-languageclient's `Executable` server options for a launch. `transport` is left unset
 * on purpose: with `TransportKind.stdio` the client appends `--stdio` to the arguments, and the
 * server speaks stdio by default without it.
 */
export function executableOptions(launch: ServerLaunch): {
  command: string;
  args: string[];
  options: { env: Record<string, string>; cwd?: string };
} {
  return {
    command: launch.command,
    args: [...launch.args],
    options: { env: launch.env, ...(launch.cwd ? { cwd: launch.cwd } : {}) },
  };
}
