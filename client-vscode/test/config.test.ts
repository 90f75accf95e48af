import assert from 'node:assert/strict';
import { test } from 'node:test';
import * as vscode from 'vscode';
import {
  Debouncer,
  effectiveTarget,
  interpreterFromSetting,
  isSettingsFile,
  nestedSection,
  notificationLevel,
  restartTrigger,
  SECTION,
  settingKeys,
  substituteVariables,
  userSection,
  userValue,
} from '../src/config';
import { standin } from './standin/vscode';

const vars = { workspaceFolder: '/ws', userHome: '/home/u', env: { VENV: '/opt/venv' } };

test('settingKeys lists every contributed setting relative to the section', () => {
  const keys = settingKeys();
  assert.ok(keys.includes('search.beamWidth'));
  assert.ok(keys.includes('llm.planner.model'));
  assert.ok(keys.includes('interpreter'));
  assert.ok(keys.every((k) => !k.startsWith(`${SECTION}.`)));
});

test('nestedSection builds the nested camelCase object the server reads, defaults included', () => {
  standin.reset();
  standin.settings.set('accelopt.search.beamWidth', 4);
  standin.settings.set('accelopt.llm.planner.model', 'gpt-planner');
  standin.settings.set('accelopt.target', 'ssh://gpu-box');
  const section = nestedSection(vscode.workspace.getConfiguration(SECTION)) as Record<string, Record<string, unknown>>;
  assert.equal(section.search.beamWidth, 4);
  assert.equal(section.search.iterations, 2, 'default from package.json (the Python model)');
  assert.equal((section.llm.planner as Record<string, unknown>).model, 'gpt-planner');
  assert.equal(section.target as unknown, 'ssh://gpu-box');
  assert.equal(section.llm.apiKeyEnv, 'OPENAI_API_KEY');
  // null defaults (llm.model) are left out so the server applies its own.
  assert.ok(!('model' in section.llm));
  assert.equal(JSON.stringify(section).includes('null'), false);
});

test('nestedSection never lets a leaf overwrite a section object', () => {
  const values: Record<string, unknown> = { 'a.b': 1, a: 'x', 'a.c': 2 };
  const out = nestedSection({ get: <T>(k: string) => values[k] as T }, ['a.b', 'a', 'a.c']);
  assert.deepEqual(out, { a: { c: 2 } });
});

test('userSection sends no package.json default, only what the user set', () => {
  standin.reset();
  assert.deepEqual(userSection(vscode.workspace.getConfiguration(SECTION)), {}, 'nothing set: nothing sent');
  standin.settings.set('accelopt.target', 'ssh://gpu-box');
  standin.settings.set('accelopt.llm.planner.model', 'gpt-planner');
  const section = userSection(vscode.workspace.getConfiguration(SECTION));
  assert.deepEqual(section, { target: 'ssh://gpu-box', llm: { planner: { model: 'gpt-planner' } } });
  // The same settings through `get` carry every default (search.iterations 2, ...).
  assert.equal((nestedSection(vscode.workspace.getConfiguration(SECTION)).search as Record<string, unknown>).iterations, 2);
});

test('userValue: the narrowest level that holds a value, never the default', () => {
  assert.equal(userValue(undefined), undefined);
  assert.equal(userValue({ defaultValue: 2 }), undefined);
  assert.equal(userValue({ defaultValue: 2, globalValue: 3 }), 3);
  assert.equal(userValue({ globalValue: 3, workspaceValue: 4 }), 4);
  assert.equal(userValue({ globalValue: 3, workspaceValue: 4, workspaceFolderValue: 5 }), 5);
  assert.equal(userValue({ workspaceFolderValue: 5, globalLanguageValue: 6 }), 6, 'language-specific values win');
  assert.equal(userValue({ workspaceFolderValue: false, workspaceValue: true }), false, 'false is a value');
});

test('interpreter setting: string, array, variables, blanks', () => {
  assert.deepEqual(interpreterFromSetting('/usr/bin/python3.11', vars), ['/usr/bin/python3.11']);
  assert.deepEqual(interpreterFromSetting(['conda', 'run', '-n', 'k', 'python'], vars), ['conda', 'run', '-n', 'k', 'python']);
  assert.deepEqual(interpreterFromSetting(['${workspaceFolder}/.venv/bin/python'], vars), ['/ws/.venv/bin/python']);
  assert.deepEqual(interpreterFromSetting('~/envs/a/bin/python', vars), ['/home/u/envs/a/bin/python']);
  assert.deepEqual(interpreterFromSetting('${env:VENV}/bin/python', vars), ['/opt/venv/bin/python']);
  assert.equal(interpreterFromSetting([], vars), undefined);
  assert.equal(interpreterFromSetting(['  ', ''], vars), undefined);
  assert.equal(interpreterFromSetting('', vars), undefined);
  assert.equal(interpreterFromSetting(42, vars), undefined);
  assert.equal(interpreterFromSetting(['python', 3], vars), undefined);
});

test('substituteVariables keeps unknown variables and a missing workspace folder as written', () => {
  assert.equal(substituteVariables('${foo}/x', vars), '${foo}/x');
  assert.equal(substituteVariables('${workspaceFolder}/x', { ...vars, workspaceFolder: undefined }), '${workspaceFolder}/x');
  assert.equal(substituteVariables('a~b', vars), 'a~b');
});

test('restart triggers: server-affecting settings restart, search settings do not', () => {
  const changed = (...sections: string[]) => ({
    affectsConfiguration: (s: string) => sections.some((c) => c === s || c.startsWith(`${s}.`)),
  });
  assert.equal(restartTrigger(changed('accelopt.interpreter')), 'accelopt.interpreter');
  assert.equal(restartTrigger(changed('accelopt.target')), 'accelopt.target');
  assert.equal(restartTrigger(changed('accelopt.llm.planner.model')), 'accelopt.llm');
  assert.equal(restartTrigger(changed('accelopt.memoryDir')), 'accelopt.memoryDir');
  assert.equal(restartTrigger(changed('accelopt.logLevel')), 'accelopt.logLevel');
  assert.equal(restartTrigger(changed('accelopt.ssh.identityFile')), 'accelopt.ssh');
  assert.equal(restartTrigger(changed('accelopt.search.beamWidth')), undefined);
  assert.equal(restartTrigger(changed('accelopt.profileOnSave')), undefined);
  assert.equal(restartTrigger(changed('accelopt.trace.server')), undefined);
  assert.equal(restartTrigger(changed('editor.fontSize')), undefined);
});

test('Debouncer collapses a burst of changes into one restart with all reasons', () => {
  const pending = new Map<number, () => void>();
  let next = 0;
  const fire = () => {
    const due = [...pending.values()];
    pending.clear();
    due.forEach((cb) => cb());
  };
  const calls: string[][] = [];
  const d = new Debouncer(500, (r) => calls.push(r), {
    set: (cb) => {
      pending.set(next, cb);
      return next++;
    },
    clear: (h) => pending.delete(h as number),
  });
  d.trigger('accelopt.llm');
  d.trigger('accelopt.target');
  d.trigger('accelopt.llm');
  assert.equal(calls.length, 0);
  assert.equal(pending.size, 1, 'one timer pending after three triggers');
  fire();
  assert.deepEqual(calls, [['accelopt.llm', 'accelopt.target']]);
  d.trigger('accelopt.logLevel');
  d.dispose();
  fire();
  assert.equal(calls.length, 1, 'a disposed debouncer does not fire');
});

test('notificationLevel defaults to onError', () => {
  standin.reset();
  assert.equal(notificationLevel(vscode.workspace.getConfiguration(SECTION)), 'onError');
  standin.settings.set('accelopt.showNotifications', 'always');
  assert.equal(notificationLevel(vscode.workspace.getConfiguration(SECTION)), 'always');
  standin.settings.set('accelopt.showNotifications', 'bogus');
  assert.equal(notificationLevel(vscode.workspace.getConfiguration(SECTION)), 'onError');
});

test('effectiveTarget reads the server\'s accelopt.showSettings answer, nothing else', () => {
  const answer = { target: 'ssh://gpu-box', targetSource: 'project file /ws/pyproject.toml', settings: {} };
  assert.deepEqual(effectiveTarget(answer), { target: 'ssh://gpu-box', source: 'project file /ws/pyproject.toml' });
  assert.deepEqual(effectiveTarget({ target: 'local' }), { target: 'local', source: 'default' });
  for (const bad of [undefined, null, 'local', { target: '' }, { target: 42 }]) {
    assert.equal(effectiveTarget(bad), undefined);
  }
});

test('isSettingsFile knows the files the server reads settings from', () => {
  assert.ok(isSettingsFile('/ws/pyproject.toml'));
  assert.ok(isSettingsFile('C:\\ws\\accelopt.toml'));
  assert.ok(!isSettingsFile('/ws/setup.cfg'));
  assert.ok(!isSettingsFile('/ws/not-pyproject.toml'));
});
