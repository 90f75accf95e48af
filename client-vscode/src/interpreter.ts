/**
 * Which Python runs the server: the `accelopt.interpreter` setting, else the active environment
 * of the Python extension (ms-python.python) when it is installed, else `python3` (`python` on
 * Windows).
 */
import * as os from 'node:os';
import * as vscode from 'vscode';
import { interpreterFromSetting, SECTION } from './config';

/** The Python extension's id. */
export const PYTHON_EXTENSION_ID = 'ms-python.python';

/** An interpreter argv prefix and where it came from (for the log). */
export interface InterpreterChoice {
  command: string[];
  source: 'setting' | 'python-extension' | 'default';
}

/** The part of the Python extension's API used here (its `environments` API). */
export interface PythonEnvironmentsApi {
  environments: {
    getActiveEnvironmentPath(resource?: vscode.Uri): { id: string; path: string };
    resolveEnvironment(
      env: { id: string; path: string } | string,
    ): Promise<{ executable: { uri?: vscode.Uri } } | undefined>;
    onDidChangeActiveEnvironmentPath: vscode.Event<unknown>;
  };
}

/** The default interpreter when nothing else names one. */
export function defaultPython(platform: string = process.platform): string {
  return platform === 'win32' ? 'python' : 'python3';
}

/** The Python extension's environments API, activating the extension; undefined when absent. */
export async function pythonExtensionApi(
  log: (line: string) => void = () => undefined,
): Promise<PythonEnvironmentsApi | undefined> {
  const ext = vscode.extensions.getExtension<PythonEnvironmentsApi>(PYTHON_EXTENSION_ID);
  if (!ext) {
    return undefined;
  }
  try {
    const api = ext.isActive ? ext.exports : await ext.activate();
    return api?.environments ? api : undefined;
  } catch (err) {
    log(`The Python extension could not be activated: ${String(err)}`);
    return undefined;
  }
}

/**
 * The interpreter for `resource` (a file or workspace folder URI). Never throws: a failing
 * Python extension is logged and skipped.
 */
export async function chooseInterpreter(
  resource?: vscode.Uri,
  log: (line: string) => void = () => undefined,
): Promise<InterpreterChoice> {
  const folder =
    (resource && vscode.workspace.getWorkspaceFolder(resource)) || vscode.workspace.workspaceFolders?.[0];
  const config = vscode.workspace.getConfiguration(SECTION, resource ?? folder?.uri);
  const fromSetting = interpreterFromSetting(config.get<unknown>('interpreter'), {
    workspaceFolder: folder?.uri.fsPath,
    userHome: os.homedir(),
    env: process.env,
  });
  if (fromSetting) {
    return { command: fromSetting, source: 'setting' };
  }
  const api = await pythonExtensionApi(log);
  if (api) {
    try {
      const active = api.environments.getActiveEnvironmentPath(resource ?? folder?.uri);
      const resolved = await api.environments.resolveEnvironment(active);
      const exe = resolved?.executable.uri?.fsPath;
      if (exe) {
        return { command: [exe], source: 'python-extension' };
      }
      log(`The Python extension's active environment (${active.path}) has no executable; using ${defaultPython()}.`);
    } catch (err) {
      log(`The Python extension did not give an interpreter: ${String(err)}`);
    }
  }
  return { command: [defaultPython()], source: 'default' };
}
