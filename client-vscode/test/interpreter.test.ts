import assert from 'node:assert/strict';
import { test } from 'node:test';
import * as vscode from 'vscode';
import { chooseInterpreter, defaultPython, PYTHON_EXTENSION_ID } from '../src/interpreter';
import { EventEmitter, standin } from './standin/vscode';

/** TEST DOUBLE of the ms-python.python extension's environments API. */
function pythonExtension(exe: string | undefined, opts: { active?: boolean; fail?: boolean } = {}) {
  const seen: { activated: boolean; resource?: unknown; resolved?: unknown } = { activated: false };
  const api = {
    environments: {
      getActiveEnvironmentPath(resource?: unknown) {
        seen.resource = resource;
        if (opts.fail) {
          throw new Error('no environment');
        }
        return { id: 'env-1', path: '/envs/k' };
      },
      async resolveEnvironment(env: unknown) {
        seen.resolved = env;
        return exe ? { executable: { uri: vscode.Uri.file(exe) } } : { executable: {} };
      },
      onDidChangeActiveEnvironmentPath: new EventEmitter<unknown>().event,
    },
  };
  const ext = {
    isActive: opts.active ?? false,
    exports: opts.active ? api : undefined,
    async activate() {
      seen.activated = true;
      return api;
    },
  };
  return { ext, seen };
}

test('the accelopt.interpreter setting wins over the Python extension', async () => {
  standin.reset();
  standin.settings.set('accelopt.interpreter', ['/opt/py/bin/python', '-X', 'utf8']);
  standin.extensions.set(PYTHON_EXTENSION_ID, pythonExtension('/envs/k/bin/python').ext);
  const choice = await chooseInterpreter();
  assert.deepEqual(choice, { command: ['/opt/py/bin/python', '-X', 'utf8'], source: 'setting' });
});

test('the setting resolves ${workspaceFolder} against the first folder', async () => {
  standin.reset();
  standin.workspaceFolders = [{ uri: vscode.Uri.file('/proj'), name: 'proj', index: 0 }];
  standin.settings.set('accelopt.interpreter', '${workspaceFolder}/.venv/bin/python');
  assert.deepEqual((await chooseInterpreter()).command, ['/proj/.venv/bin/python']);
});

test("without the setting, the Python extension's active environment is used (activating it)", async () => {
  standin.reset();
  const { ext, seen } = pythonExtension('/envs/k/bin/python');
  standin.extensions.set(PYTHON_EXTENSION_ID, ext);
  const file = vscode.Uri.file('/proj/kernel.py');
  const choice = await chooseInterpreter(file);
  assert.deepEqual(choice, { command: ['/envs/k/bin/python'], source: 'python-extension' });
  assert.equal(seen.activated, true);
  assert.equal(seen.resource, file);
  assert.deepEqual(seen.resolved, { id: 'env-1', path: '/envs/k' });
});

test('an already active Python extension is used without activating it again', async () => {
  standin.reset();
  const { ext, seen } = pythonExtension('/envs/a/bin/python', { active: true });
  standin.extensions.set(PYTHON_EXTENSION_ID, ext);
  assert.deepEqual((await chooseInterpreter()).command, ['/envs/a/bin/python']);
  assert.equal(seen.activated, false);
});

test('a failing or executable-less Python extension falls back to python3, with a log line', async () => {
  for (const [exe, fail] of [
    ['/x', true],
    [undefined, false],
  ] as const) {
    standin.reset();
    standin.extensions.set(PYTHON_EXTENSION_ID, pythonExtension(exe, { fail }).ext);
    const lines: string[] = [];
    const choice = await chooseInterpreter(undefined, (l) => lines.push(l));
    assert.deepEqual(choice, { command: [defaultPython()], source: 'default' });
    assert.equal(lines.length, 1);
  }
});

test('no setting and no Python extension: python3 (python on Windows)', async () => {
  standin.reset();
  assert.deepEqual(await chooseInterpreter(), { command: [defaultPython()], source: 'default' });
  assert.equal(defaultPython('linux'), 'python3');
  assert.equal(defaultPython('win32'), 'python');
});
