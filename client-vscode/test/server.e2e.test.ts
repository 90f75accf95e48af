/**
 * End to end: starts the REAL AccelOpt server (python -m accelopt_server) with the command line
 * and environment the extension builds, and talks LSP to it over stdio with plain JSON-RPC
 * (vscode-languageserver-protocol, no VS Code): initialize -> the accelopt.* commands are
 * offered -> initialized -> accelopt.listJobs -> shutdown -> exit.
 * Skipped ONLY when the interpreter lacks the accelopt_server package.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import * as vscode from 'vscode';
import {
  createProtocolConnection,
  ExecuteCommandRequest,
  ExitNotification,
  InitializedNotification,
  InitializeRequest,
  ShutdownRequest,
  StreamMessageReader,
  StreamMessageWriter,
} from 'vscode-languageserver-protocol/node';
import { nestedSection, SECTION } from '../src/config';
import { chooseInterpreter } from '../src/interpreter';
import { executableOptions, probeInterpreter, probeMessage, serverLaunch } from '../src/serverProcess';
import { standin } from './standin/vscode';

const COMMANDS = [
  'accelopt.optimize',
  'accelopt.cancel',
  'accelopt.profile',
  'accelopt.showMemory',
  'accelopt.clearResults',
  'accelopt.listJobs',
  'accelopt.applyCandidate',
];

test('the real server starts from the extension command line and offers the accelopt.* commands', { timeout: 120_000 }, async (t) => {
  standin.reset();
  if (process.env.ACCELOPT_TEST_PYTHON) {
    standin.settings.set('accelopt.interpreter', [process.env.ACCELOPT_TEST_PYTHON]);
  }
  const choice = await chooseInterpreter();
  const probe = await probeInterpreter(choice.command);
  if (!probe.ok && probe.reason === 'missing-module') {
    t.skip(`${probeMessage(probe, choice.command)} (set ACCELOPT_TEST_PYTHON to pick another interpreter)`);
    return;
  }
  assert.ok(probe.ok, `interpreter ${choice.command.join(' ')}: ${JSON.stringify(probe)}`);

  const memoryDir = mkdtempSync(join(tmpdir(), 'accelopt-e2e-'));
  const launch = serverLaunch(choice.command, { ...process.env, ACCELOPT_MEMORY_DIR: memoryDir });
  const exe = executableOptions(launch);
  const proc = spawn(exe.command, exe.args, { env: exe.options.env, stdio: ['pipe', 'pipe', 'pipe'] });
  let stderr = '';
  proc.stderr.on('data', (d) => (stderr += d.toString()));
  const exited = new Promise<number | null>((resolve) => proc.on('exit', (code) => resolve(code)));

  const conn = createProtocolConnection(new StreamMessageReader(proc.stdout), new StreamMessageWriter(proc.stdin));
  const config = vscode.workspace.getConfiguration(SECTION);
  const configRequests: unknown[] = [];
  conn.onRequest('workspace/configuration', (params: { items: { section?: string }[] }) => {
    configRequests.push(params);
    return params.items.map((item) => (item.section === SECTION ? nestedSection(config) : null));
  });
  conn.onRequest('window/workDoneProgress/create', () => null);
  conn.onRequest('client/registerCapability', () => null);
  conn.onRequest('client/unregisterCapability', () => null);
  conn.listen();

  try {
    const init = await conn.sendRequest(InitializeRequest.type, {
      processId: process.pid,
      rootUri: null,
      workspaceFolders: null,
      capabilities: {
        workspace: { configuration: true, didChangeConfiguration: { dynamicRegistration: true } },
        window: { workDoneProgress: true },
        textDocument: { codeLens: {}, codeAction: { codeActionLiteralSupport: { codeActionKind: { valueSet: ['refactor.rewrite'] } } } },
      },
      initializationOptions: nestedSection(config),
    });
    const offered = init.capabilities.executeCommandProvider?.commands ?? [];
    for (const command of COMMANDS) {
      assert.ok(offered.includes(command), `server offers ${command} (offered: ${offered.join(', ')})`);
    }
    await conn.sendNotification(InitializedNotification.type, {});
    const jobs = await conn.sendRequest(ExecuteCommandRequest.type, { command: 'accelopt.listJobs', arguments: [] });
    assert.deepEqual(jobs, [], 'a fresh server has no searches');
    await conn.sendRequest(ShutdownRequest.type);
    await conn.sendNotification(ExitNotification.type);
    let timer: NodeJS.Timeout | undefined;
    const code = await Promise.race([exited, new Promise<string>((r) => (timer = setTimeout(() => r('timeout'), 30_000)))]);
    clearTimeout(timer);
    assert.equal(code, 0, `server exit status (stderr: ${stderr.slice(-2000)})`);
  } finally {
    conn.dispose();
    if (proc.exitCode === null) {
      proc.kill();
    }
  }
});
