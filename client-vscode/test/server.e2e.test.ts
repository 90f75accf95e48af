/**
 * End to end: starts the REAL AccelOpt server (python -m accelopt_server) with the command line
 * and environment the extension builds, and talks LSP to it over stdio with plain JSON-RPC
 * (vscode-languageserver-protocol, no VS Code): initialize -> the accelopt.* commands are
 * offered -> initialized -> accelopt.listJobs -> didOpen a kernel file -> its code lenses name
 * the kernel as the palette commands expect -> shutdown -> exit.
 * Skipped ONLY when the interpreter lacks the accelopt_server package.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { test, TestContext } from 'node:test';
import {
  CodeLensRequest,
  createProtocolConnection,
  DidOpenTextDocumentNotification,
  ExecuteCommandRequest,
  ExitNotification,
  InitializedNotification,
  InitializeRequest,
  ShutdownRequest,
  StreamMessageReader,
  StreamMessageWriter,
  WorkDoneProgressCancelNotification,
} from 'vscode-languageserver-protocol/node';
import { SECTION } from '../src/config';
import { JobTracker, parseJobs, ProgressValue } from '../src/jobs';
import { kernelAt, kernelsFromLenses } from '../src/kernels';
import { ProgressNotifications } from '../src/progress';
import { chooseInterpreter } from '../src/interpreter';
import { executableOptions, probeInterpreter, probeMessage, serverLaunch } from '../src/serverProcess';
import { initialSettings, userSettings } from '../src/settingsSync';
import { KERNEL_FILE, until } from './fixtures';
import { ProgressLocation, standin } from './standin/vscode';


const COMMANDS = [
  'accelopt.optimize',
  'accelopt.cancel',
  'accelopt.profile',
  'accelopt.showMemory',
  'accelopt.clearResults',
  'accelopt.listJobs',
  'accelopt.applyCandidate',
];

interface Running {
  conn: ReturnType<typeof createProtocolConnection>;
  exited: Promise<number | null>;
  stderr: () => string;
  dir: string;
  stop(): void;
}

/** Starts the server as the extension does; undefined (after t.skip) when it is not installed. */
async function startServer(t: TestContext): Promise<Running | undefined> {
  if (process.env.ACCELOPT_TEST_PYTHON) {
    standin.settings.set('accelopt.interpreter', [process.env.ACCELOPT_TEST_PYTHON]);
  }
  const choice = await chooseInterpreter();
  const probe = await probeInterpreter(choice.command);
  if (!probe.ok && probe.reason === 'missing-module') {
    t.skip(`${probeMessage(probe, choice.command)} (set ACCELOPT_TEST_PYTHON to pick another interpreter)`);
    return undefined;
  }
  assert.ok(probe.ok, `interpreter ${choice.command.join(' ')}: ${JSON.stringify(probe)}`);
  const dir = mkdtempSync(join(tmpdir(), 'accelopt-e2e-'));
  const launch = serverLaunch(choice.command, { ...process.env, ACCELOPT_MEMORY_DIR: dir });
  const exe = executableOptions(launch);
  const proc = spawn(exe.command, exe.args, { env: exe.options.env, stdio: ['pipe', 'pipe', 'pipe'] });
  let stderr = '';
  proc.stderr.on('data', (d) => (stderr += d.toString()));
  const exited = new Promise<number | null>((resolve) => proc.on('exit', (code) => resolve(code)));
  const conn = createProtocolConnection(new StreamMessageReader(proc.stdout), new StreamMessageWriter(proc.stdin));
  conn.onRequest('workspace/configuration', (params: { items: { section?: string; scopeUri?: string }[] }) =>
    params.items.map((item) => (item.section === SECTION ? userSettings(item.scopeUri) : null)),
  );
  conn.onRequest('window/workDoneProgress/create', () => null);
  conn.onRequest('client/registerCapability', () => null);
  conn.onRequest('client/unregisterCapability', () => null);
  conn.onRequest('workspace/codeLens/refresh', () => null);
  conn.listen();
  return {
    conn,
    exited,
    dir,
    stderr: () => stderr,
    stop() {
      conn.dispose();
      if (proc.exitCode === null) {
        proc.kill();
      }
    },
  };
}

async function initialize(server: Running) {
  const init = await server.conn.sendRequest(InitializeRequest.type, {
    processId: process.pid,
    rootUri: null,
    workspaceFolders: null,
    capabilities: {
      workspace: { configuration: true, didChangeConfiguration: { dynamicRegistration: true } },
      window: { workDoneProgress: true },
      textDocument: { codeLens: {}, codeAction: { codeActionLiteralSupport: { codeActionKind: { valueSet: ['refactor.rewrite'] } } } },
    },
    initializationOptions: initialSettings(),
  });
  await server.conn.sendNotification(InitializedNotification.type, {});
  return init;
}

async function openKernelFile(server: Running): Promise<string> {
  const file = join(server.dir, 'scale.py');
  writeFileSync(file, KERNEL_FILE);
  const uri = pathToFileURL(file).toString();
  await server.conn.sendNotification(DidOpenTextDocumentNotification.type, {
    textDocument: { uri, languageId: 'python', version: 1, text: KERNEL_FILE },
  });
  return uri;
}

async function shutdown(server: Running): Promise<void> {
  await server.conn.sendRequest(ShutdownRequest.type);
  await server.conn.sendNotification(ExitNotification.type);
  let timer: NodeJS.Timeout | undefined;
  const code = await Promise.race([server.exited, new Promise<string>((r) => (timer = setTimeout(() => r('timeout'), 30_000)))]);
  clearTimeout(timer);
  assert.equal(code, 0, `server exit status (stderr: ${server.stderr().slice(-2000)})`);
}


test('the real server starts from the extension command line and offers the accelopt.* commands', { timeout: 120_000 }, async (t) => {
  standin.reset();
  standin.settings.set('accelopt.profileOnSave', false);
  const server = await startServer(t);
  if (!server) {
    return;
  }
  try {
    const init = await initialize(server);
    const offered = init.capabilities.executeCommandProvider?.commands ?? [];
    for (const command of COMMANDS) {
      assert.ok(offered.includes(command), `server offers ${command} (offered: ${offered.join(', ')})`);
    }
    const jobs = await server.conn.sendRequest(ExecuteCommandRequest.type, { command: 'accelopt.listJobs', arguments: [] });
    assert.deepEqual(jobs, [], 'a fresh server has no searches');

    const uri = await openKernelFile(server);
    const lenses = (await server.conn.sendRequest(CodeLensRequest.type, { textDocument: { uri } })) ?? [];
    const kernels = kernelsFromLenses(lenses);
    assert.deepEqual(
      kernels.map((k) => [k.name, k.uri]),
      [['scale_kernel', uri]],
      `kernels from the server's code lenses: ${JSON.stringify(lenses)}`,
    );
    const launcherLine = KERNEL_FILE.split('\n').indexOf('def scale(x):');
    assert.equal(kernelAt(kernels, launcherLine)?.name, 'scale_kernel');
    await shutdown(server);
  } finally {
    server.stop();
  }
});

test(
  "a real search's progress becomes a cancellable notification, and Cancel stops the search on the server",
  { timeout: 240_000 },
  async (t) => {
    standin.reset();
    standin.settings.set('accelopt.profileOnSave', false);
    standin.settings.set('accelopt.search.iterations', 1);
    standin.settings.set('accelopt.search.beamWidth', 1);
    standin.settings.set('accelopt.search.plansPerCandidate', 1);
    standin.settings.set('accelopt.evaluation.seeds', 1);
    const server = await startServer(t);
    if (!server) {
      return;
    }
    try {
      await initialize(server);
      const tracker = new JobTracker();
      const progress = new ProgressNotifications(tracker, (token) =>
        void server.conn.sendNotification(WorkDoneProgressCancelNotification.type, { token }),
      );
      server.conn.onNotification('$/progress', (p: { token: string | number; value: ProgressValue }) =>
        progress.handle(p.token, p.value, () => undefined),
      );
      const uri = await openKernelFile(server);
      const started = (await server.conn.sendRequest(ExecuteCommandRequest.type, {
        command: 'accelopt.optimize',
        arguments: [uri, 'scale_kernel'],
      })) as { jobId: string; started: boolean; message?: string };
      assert.equal(started.started, true, `optimize refused: ${started.message}`);

      await until('the search notification', () => standin.progress.length > 0, 60_000);
      const note = standin.progress[0];
      assert.equal(note.options.title, 'AccelOpt: optimizing scale_kernel');
      assert.equal(note.options.cancellable, true);
      assert.equal(note.options.location, ProgressLocation.Notification);
      assert.equal(tracker.list().length, 1, 'the status bar sees the running search');

      note.cancel();
      await until('the end of the cancelled search', () => note.done, 120_000);
      assert.deepEqual(tracker.list(), []);
      const jobs = parseJobs(
        await server.conn.sendRequest(ExecuteCommandRequest.type, { command: 'accelopt.listJobs', arguments: [] }),
      );
      assert.deepEqual(
        jobs.map((j) => [j.jobId, j.state]),
        [[started.jobId, 'cancelled']],
      );
      await shutdown(server);
    } finally {
      server.stop();
    }
  },
);
