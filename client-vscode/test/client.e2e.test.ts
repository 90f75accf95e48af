/**
 * End to end through the extension's own glue: ServerManager (src/server.ts) starts the REAL
 * server with the REAL vscode-languageclient 9 (only the `vscode` module is the stand-in),
 * then a search is started through the client, its progress reaches the status bar and a
 * cancellable notification through the client's middleware, and Cancel stops it. The search uses
 * the project file's setting where the user set none (only user-set values reach the server).
 * Skipped ONLY when the interpreter lacks the accelopt_server package.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { JobTracker, parseJobs } from '../src/jobs';
import { redactingChannel } from '../src/secrets';
import { ServerManager } from '../src/server';
import { probeInterpreter } from '../src/serverProcess';
import { StatusBar } from '../src/statusBar';
import * as vscode from 'vscode';
import { KERNEL_FILE, until } from './fixtures';
import { ProgressLocation, standin } from './standin/vscode';


const SECRET = 'sk-standin-secret-1234';
const logTail = (): string => standin.logLines.slice(-30).join('\n');


test(
  'ServerManager + vscode-languageclient + the real server: start, optimize, progress notification, cancel, memory, stop',
  { timeout: 240_000 },
  async (t) => {
    standin.reset();
    const python = process.env.ACCELOPT_TEST_PYTHON || 'python3';
    const probe = await probeInterpreter([python]);
    if (!probe.ok && probe.reason === 'missing-module') {
      t.skip(`${python} lacks accelopt_server`);
      return;
    }
    const dir = mkdtempSync(join(tmpdir(), 'accelopt-client-'));
    process.env.ACCELOPT_MEMORY_DIR = dir;
    process.env.ACCELOPT_CONFIG = join(dir, 'no-user-config.toml'); // the developer's own stays out
    standin.settings.set('accelopt.interpreter', [python]);
    standin.settings.set('accelopt.profileOnSave', false);
    standin.settings.set('accelopt.trace.server', 'verbose');
    standin.settings.set('accelopt.search.iterations', 1);
    standin.settings.set('accelopt.search.plansPerCandidate', 1);
    standin.settings.set('accelopt.evaluation.seeds', 1);
    // The project file sets beamWidth and plansPerCandidate; the user set only the latter, so the
    // server must use the project's beamWidth (no package.json default may hide it) and the
    // user's plansPerCandidate.
    writeFileSync(join(dir, 'pyproject.toml'), '[tool.accelopt.search]\nbeamWidth = 3\nplansPerCandidate = 4\n');
    // The kernel file is open in the editor: the client sends didOpen for it at start.
    const file = join(dir, 'scale.py');
    writeFileSync(file, KERNEL_FILE);
    const uri = vscode.Uri.file(file);
    standin.textDocuments.push({
      uri,
      fileName: file,
      languageId: 'python',
      version: 1,
      isClosed: false,
      getText: () => KERNEL_FILE,
    });

    const secrets = new Map<string, string>([['accelopt.apiKey.OPENAI_API_KEY', SECRET]]);
    const context = {
      secrets: {
        get: async (k: string) => secrets.get(k),
        store: async (k: string, v: string) => void secrets.set(k, v),
        delete: async (k: string) => void secrets.delete(k),
      },
      subscriptions: [],
    } as unknown as vscode.ExtensionContext;
    const secretValues = new Set<string>();
    const log = redactingChannel(vscode.window.createOutputChannel('AccelOpt', { log: true }), () => secretValues);
    const tracker = new JobTracker();
    const status = new StatusBar(tracker);
    const shown: string[] = [];
    const manager = new ServerManager(context, log, status, tracker, async (_title, md) => void shown.push(md), secretValues);
    const item = standin.statusItems[0];
    try {
      await manager.start();
      assert.equal(manager.running, true, standin.logLines.join('\n'));
      assert.equal(item.text, '$(zap) AccelOpt: local');
      assert.ok(standin.logLines.includes(`[info] Starting the server: ${python} -m accelopt_server`), 'no --stdio appended');
      assert.ok(standin.logLines.includes('[info] API key OPENAI_API_KEY: from VS Code SecretStorage'));
      assert.deepEqual([...secretValues], [SECRET]);

      const started = (await manager.execute('accelopt.optimize', [uri.toString(), 'scale_kernel'])) as {
        jobId: string;
        started: boolean;
        message?: string;
      };
      assert.equal(started?.started, true, `optimize: ${JSON.stringify(started)}`);
      assert.match(started.message ?? '', /: B=3, N=1, K=1, T=1 on local$/, 'project beamWidth, user plansPerCandidate');
      await until('the search notification', () => standin.progress.some((p) => p.options.location === ProgressLocation.Notification), 60_000, logTail);
      const note = standin.progress.find((p) => p.options.location === ProgressLocation.Notification)!;
      assert.equal(note.options.title, 'AccelOpt: optimizing scale_kernel');
      assert.equal(note.options.cancellable, true);
      assert.equal(
        standin.progress.filter((p) => p.options.location === ProgressLocation.Window).length,
        0,
        "the client's own (uncancellable) window progress is replaced, not doubled",
      );
      assert.match(item.text, /^\$\(sync~spin\) AccelOpt: optimizing scale_kernel/);

      note.cancel(); // the Cancel button
      await until('the end of the cancelled search', () => note.done, 120_000, logTail);
      assert.equal(item.text, '$(zap) AccelOpt: local');
      const jobs = parseJobs(await manager.query('accelopt.listJobs', []));
      assert.deepEqual(jobs.map((j) => [j.jobId, j.state]), [[started.jobId, 'cancelled']]);

      await manager.execute('accelopt.showMemory', [uri.toString(), 'scale_kernel']);
      assert.equal(shown.length, 1, 'Show Memory renders the markdown');

      const traced = standin.logLines.join('\n');
      assert.match(traced, /Sending request 'initialize/, 'trace.server=verbose traces into the log channel');
      assert.ok(!traced.includes(SECRET), 'the API key never reaches the log');
    } finally {
      await manager.stop();
      if (process.env.ACCELOPT_TEST_DUMP_LOG) {
        console.log(standin.logLines.join('\n'));
      }
    }
    assert.equal(manager.running, false);
    assert.equal(item.text, '$(circle-slash) AccelOpt');
  },
);

test('ServerManager: an interpreter without the package or a missing interpreter is reported, not started', async () => {
  const python = process.env.ACCELOPT_TEST_PYTHON || 'python3';
  for (const [interpreter, state, text] of [
    // -S leaves site-packages (where accelopt is installed) off sys.path.
    [[python, '-S'], 'not-installed', `Install it with: ${python} -S -m pip install "accelopt[triton]"`],
    [['/nonexistent/bin/python3'], 'failed', 'was not found'],
  ] as const) {
    standin.reset();
    standin.settings.set('accelopt.interpreter', [...interpreter]);
    const context = { secrets: { get: async () => undefined }, subscriptions: [] } as unknown as vscode.ExtensionContext;
    const tracker = new JobTracker();
    const status = new StatusBar(tracker);
    const log = vscode.window.createOutputChannel('AccelOpt', { log: true });
    const manager = new ServerManager(context, log, status, tracker, async () => undefined, new Set());
    await manager.start();
    assert.equal(manager.running, false);
    const item = standin.statusItems[0];
    assert.equal(item.text, '$(warning) AccelOpt', state);
    assert.ok(String(item.tooltip).includes(text), String(item.tooltip));
    assert.equal(item.command, 'accelopt.showLogs');
    const errors = standin.messages.filter((m) => m.severity === 'error');
    assert.equal(errors.length, 1);
    assert.ok(errors[0].text.includes(text), errors[0].text);
    assert.ok(standin.logLines.some((l) => l.startsWith('[error]') && l.includes(text)));
    await manager.stop();
  }
});
