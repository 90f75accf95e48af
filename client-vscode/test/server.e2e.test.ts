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
import { test } from 'node:test';
import * as vscode from 'vscode';
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
} from 'vscode-languageserver-protocol/node';
import { nestedSection, SECTION } from '../src/config';
import { kernelAt, kernelsFromLenses } from '../src/kernels';
import { chooseInterpreter } from '../src/interpreter';
import { executableOptions, probeInterpreter, probeMessage, serverLaunch } from '../src/serverProcess';
import { standin } from './standin/vscode';

/** A kernel file with its benchmark harness (DESIGN.md); only parsed here, never run. */
const KERNEL_FILE = `import torch
import triton
import triton.language as tl


@triton.jit
def scale_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) * 2.0, mask=mask)


def scale(x):
    out = torch.empty_like(x)
    scale_kernel[(triton.cdiv(x.numel(), 256),)](x, out, x.numel(), BLOCK=256)
    return out


def get_inputs(seed: int, device: str) -> tuple:
    g = torch.Generator(device="cpu").manual_seed(seed)
    return (torch.randn(1024, generator=g).to(device),)


def reference(x):
    return x * 2.0


BENCH = {"entry": scale}
`;

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
  standin.settings.set('accelopt.profileOnSave', false);
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

    const file = join(memoryDir, 'scale.py');
    writeFileSync(file, KERNEL_FILE);
    const uri = pathToFileURL(file).toString();
    await conn.sendNotification(DidOpenTextDocumentNotification.type, {
      textDocument: { uri, languageId: 'python', version: 1, text: KERNEL_FILE },
    });
    const lenses = (await conn.sendRequest(CodeLensRequest.type, { textDocument: { uri } })) ?? [];
    const kernels = kernelsFromLenses(lenses);
    assert.deepEqual(
      kernels.map((k) => [k.name, k.uri]),
      [['scale_kernel', uri]],
      `kernels from the server's code lenses: ${JSON.stringify(lenses)}`,
    );
    const launcherLine = KERNEL_FILE.split('\n').indexOf('def scale(x):');
    assert.equal(kernelAt(kernels, launcherLine)?.name, 'scale_kernel');
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
