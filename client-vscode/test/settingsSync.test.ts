import assert from 'node:assert/strict';
import { test } from 'node:test';
import * as vscode from 'vscode';
import type { CancellationToken, ConfigurationParams } from 'vscode-languageclient/node';
import { ResponseError } from 'vscode-languageserver-protocol';
import { initialSettings, settingsMiddleware, userSettings } from '../src/settingsSync';
import { standin } from './standin/vscode';

const token = { isCancellationRequested: false } as CancellationToken;

/** Two workspace folders, /ws/a and /ws/b. */
function twoFolders(): void {
  standin.reset();
  standin.workspaceFolders = [
    { uri: vscode.Uri.file('/ws/a'), name: 'a', index: 0 },
    { uri: vscode.Uri.file('/ws/b'), name: 'b', index: 1 },
  ];
}

test('nothing set: no default is sent, neither at start nor for a scope', () => {
  twoFolders();
  assert.deepEqual(initialSettings(), {});
  assert.deepEqual(userSettings('file:///ws/a/kernel.py'), {});
  assert.deepEqual(userSettings(null), {});
});

test('a workspace-folder value (accelopt.search.beamWidth) is sent nested under search for that folder', () => {
  twoFolders();
  standin.folderSettings.set('/ws/a', new Map([['accelopt.search.beamWidth', 5]]));
  assert.deepEqual(userSettings('file:///ws/a/kernel.py'), { search: { beamWidth: 5 } });
  assert.deepEqual(userSettings('file:///ws/b/kernel.py'), {}, 'not for the other folder');
  assert.deepEqual(initialSettings(), {}, 'not in initializationOptions (they apply to every folder)');
});

test("a folder value beats a workspace value for that folder's scope; the workspace value beats the user's", () => {
  twoFolders();
  standin.settings.set('accelopt.search.beamWidth', 7);
  standin.settings.set('accelopt.search.iterations', 4);
  standin.workspaceSettings.set('accelopt.search.beamWidth', 3);
  standin.folderSettings.set('/ws/a', new Map([['accelopt.search.beamWidth', 5]]));
  assert.deepEqual(userSettings('file:///ws/a/kernel.py'), { search: { beamWidth: 5, iterations: 4 } });
  assert.deepEqual(userSettings('file:///ws/b/kernel.py'), { search: { beamWidth: 3, iterations: 4 } });
  assert.deepEqual(initialSettings(), { search: { beamWidth: 3, iterations: 4 } });
});

test('workspace/configuration middleware: accelopt items answered per scope, other sections left to the default', async () => {
  twoFolders();
  standin.folderSettings.set('/ws/a', new Map([['accelopt.search.beamWidth', 5]]));
  standin.workspaceSettings.set('accelopt.target', 'ssh://gpu-box');
  const calls: { params: ConfigurationParams; token: CancellationToken }[] = [];
  const next = (params: ConfigurationParams, t: CancellationToken) => {
    calls.push({ params, token: t });
    return params.items.map((item) => `default:${item.section}`);
  };
  const configuration = settingsMiddleware().configuration!;
  const params: ConfigurationParams = {
    items: [
      { section: 'accelopt', scopeUri: 'file:///ws/a/kernel.py' },
      { section: 'python.analysis', scopeUri: 'file:///ws/a/kernel.py' },
      { section: 'accelopt' },
      { section: 'editor' },
    ],
  };
  const answer = await configuration(params, token, next);
  assert.deepEqual(answer, [
    { target: 'ssh://gpu-box', search: { beamWidth: 5 } },
    'default:python.analysis',
    { target: 'ssh://gpu-box' },
    'default:editor',
  ]);
  assert.equal(calls.length, 1, 'one call to the default handler for the other sections');
  assert.deepEqual(calls[0].params.items.map((i) => i.section), ['python.analysis', 'editor']);
  assert.equal(calls[0].token, token);

  calls.length = 0;
  const onlyOthers: ConfigurationParams = { items: [{ section: 'editor' }] };
  assert.deepEqual(await configuration(onlyOthers, token, next), ['default:editor']);
  assert.equal(calls[0].params, onlyOthers, 'a request without accelopt items passes through unchanged');

  calls.length = 0;
  assert.deepEqual(await configuration({ items: [{ section: 'accelopt' }] }, token, next), [{ target: 'ssh://gpu-box' }]);
  assert.equal(calls.length, 0, 'the default handler is not called when every item is ours');
});

test('workspace/configuration middleware: an error from the default handler is returned as is', async () => {
  twoFolders();
  const failure = new ResponseError<void>(-32603, 'no such section');
  const answer = await settingsMiddleware().configuration!(
    { items: [{ section: 'accelopt' }, { section: 'editor' }] },
    token,
    () => failure,
  );
  assert.equal(answer, failure);
});

test('didChangeConfiguration pushes settings: null (the server pulls the scoped values)', async () => {
  const seen: (string[] | undefined)[] = [];
  await settingsMiddleware().didChangeConfiguration!(['accelopt'], async (sections) => void seen.push(sections));
  assert.deepEqual(seen, [undefined]);
});
