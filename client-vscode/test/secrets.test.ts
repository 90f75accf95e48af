import assert from 'node:assert/strict';
import { test } from 'node:test';
import * as vscode from 'vscode';
import { SECTION } from '../src/config';
import {
  apiKeyEnvNames,
  describeKeySources,
  redact,
  redactingChannel,
  secretEnv,
  secretKey,
  SecretStore,
  setApiKey,
} from '../src/secrets';
import { serverLaunch } from '../src/serverProcess';
import { standin } from './standin/vscode';

/** TEST DOUBLE of vscode.SecretStorage (an in-memory map). */
class MemorySecrets implements SecretStore {
  readonly data = new Map<string, string>();
  async get(key: string) {
    return this.data.get(key);
  }
  async store(key: string, value: string) {
    this.data.set(key, value);
  }
  async delete(key: string) {
    this.data.delete(key);
  }
}

const KEY = 'sk-test-0123456789abcdef';

test('key variable names: the shared one, then distinct valid role overrides', () => {
  standin.reset();
  const config = () => vscode.workspace.getConfiguration(SECTION);
  assert.deepEqual(apiKeyEnvNames(config()), ['OPENAI_API_KEY']);
  standin.settings.set('accelopt.llm.apiKeyEnv', 'VLLM_KEY');
  standin.settings.set('accelopt.llm.planner.apiKeyEnv', 'ANTHROPIC_KEY');
  standin.settings.set('accelopt.llm.executor.apiKeyEnv', 'VLLM_KEY');
  standin.settings.set('accelopt.llm.fixer.apiKeyEnv', 'not a name');
  assert.deepEqual(apiKeyEnvNames(config()), ['VLLM_KEY', 'ANTHROPIC_KEY']);
});

test('Set API Key stores the key in SecretStorage only: never in settings, never in the log', async () => {
  standin.reset();
  const secrets = new MemorySecrets();
  const log: string[] = [];
  const asked: string[] = [];
  const outcome = await setApiKey(
    secrets,
    ['OPENAI_API_KEY'],
    {
      pickName: async () => assert.fail('one name: no pick'),
      askKey: async (name) => {
        asked.push(name);
        return `  ${KEY}  `;
      },
    },
    (l) => log.push(l),
  );
  assert.deepEqual(outcome, { action: 'stored', name: 'OPENAI_API_KEY' });
  assert.deepEqual(asked, ['OPENAI_API_KEY']);
  assert.equal(secrets.data.get(secretKey('OPENAI_API_KEY')), KEY);
  assert.equal(standin.configUpdates.length, 0, 'nothing written to settings');
  assert.ok(log.length > 0);
  assert.ok(log.every((l) => !l.includes(KEY)), 'key not logged');
});

test('Set API Key with several variables asks which; empty input deletes; dismissing keeps', async () => {
  const secrets = new MemorySecrets();
  await secrets.store(secretKey('B_KEY'), 'old');
  const prompts = (pick: string | undefined, key: string | undefined) => ({
    pickName: async (names: string[]) => {
      assert.deepEqual(names, ['A_KEY', 'B_KEY']);
      return pick;
    },
    askKey: async () => key,
  });
  assert.deepEqual(await setApiKey(secrets, ['A_KEY', 'B_KEY'], prompts(undefined, 'x'), () => undefined), {
    action: 'dismissed',
  });
  assert.deepEqual(await setApiKey(secrets, ['A_KEY', 'B_KEY'], prompts('B_KEY', undefined), () => undefined), {
    action: 'dismissed',
  });
  assert.equal(secrets.data.get(secretKey('B_KEY')), 'old');
  assert.deepEqual(await setApiKey(secrets, ['A_KEY', 'B_KEY'], prompts('B_KEY', ''), () => undefined), {
    action: 'deleted',
    name: 'B_KEY',
  });
  assert.equal(secrets.data.has(secretKey('B_KEY')), false);
});

test('the stored key reaches the server process env under the configured name, and only its source is logged', async () => {
  standin.reset();
  standin.settings.set('accelopt.llm.apiKeyEnv', 'MY_LLM_KEY');
  const secrets = new MemorySecrets();
  await secrets.store(secretKey('MY_LLM_KEY'), KEY);
  const names = apiKeyEnvNames(vscode.workspace.getConfiguration(SECTION));
  const base = { PATH: '/bin', OTHER_KEY: 'env-value' };
  const { env, sources } = await secretEnv(secrets, [...names, 'OTHER_KEY', 'NOPE_KEY'], base);
  assert.deepEqual(env, { MY_LLM_KEY: KEY });
  assert.deepEqual(sources, { MY_LLM_KEY: 'secret-storage', OTHER_KEY: 'environment', NOPE_KEY: 'missing' });
  const launch = serverLaunch(['python3'], base, env);
  assert.equal(launch.env.MY_LLM_KEY, KEY);
  assert.ok(!launch.args.join(' ').includes(KEY), 'not on the command line');
  const lines = describeKeySources(sources);
  assert.equal(lines.length, 3);
  assert.ok(lines.every((l) => !l.includes(KEY) && !l.includes('env-value')));
  assert.match(lines[0], /MY_LLM_KEY: from VS Code SecretStorage/);
});

test('redact hides every occurrence of a secret', () => {
  assert.equal(redact(`a ${KEY} b ${KEY}`, [KEY, '']), 'a *** b ***');
});

test('the log channel given to the language client redacts known keys in every method', () => {
  standin.reset();
  const known = new Set<string>();
  const channel = redactingChannel(vscode.window.createOutputChannel('AccelOpt', { log: true }), () => known);
  channel.info(`before ${KEY}`);
  known.add(KEY);
  channel.append(`server stderr: OPENAI_API_KEY=${KEY}\n`);
  channel.error(`error ${KEY}`);
  assert.equal(channel.name, 'AccelOpt', 'properties pass through');
  assert.deepEqual(standin.logLines, [`[info] before ${KEY}`, 'server stderr: OPENAI_API_KEY=***\n', '[error] error ***']);
});
