import assert from 'node:assert/strict';
import { test } from 'node:test';
import { isRunning, JobTracker, jobLabel, parseJobs, statusView } from '../src/jobs';
import { ProgressNotifications } from '../src/progress';
import { StatusBar } from '../src/statusBar';
import { ProgressLocation, standin } from './standin/vscode';

const tick = () => new Promise((r) => setImmediate(r));

test('the tracker follows begin / report / end of AccelOpt progress only', () => {
  const t = new JobTracker();
  let changes = 0;
  t.onChange(() => changes++);
  t.apply('tok-1', { kind: 'begin', title: 'AccelOpt: optimizing softmax_kernel', cancellable: true, percentage: 0 });
  t.apply(7, { kind: 'begin', title: 'Indexing', cancellable: false });
  t.apply(7, { kind: 'report', message: 'ignored' });
  assert.deepEqual(t.list(), [
    { token: 'tok-1', title: 'AccelOpt: optimizing softmax_kernel', message: undefined, percentage: 0, cancellable: true },
  ]);
  t.apply('tok-1', { kind: 'report', message: 'iteration 2/4 · best 1.8x', percentage: 50 });
  assert.equal(t.list()[0].message, 'iteration 2/4 · best 1.8x');
  assert.equal(t.list()[0].percentage, 50);
  t.apply('tok-1', { kind: 'end' });
  t.apply('tok-1', { kind: 'end' });
  assert.deepEqual(t.list(), []);
  assert.equal(changes, 3, 'begin, report, end of the AccelOpt token; nothing for others or a repeated end');
});

test('status bar text: target when idle, the search and its progress when one runs, a count for more', () => {
  const one = [{ token: '1', title: 'AccelOpt: optimizing softmax_kernel', message: 'iteration 2/4 · best 1.8x', cancellable: true }];
  assert.equal(statusView('ssh://h100', 'running', []).text, '$(zap) AccelOpt: ssh://h100');
  assert.equal(statusView('local', 'running', one).text, '$(sync~spin) AccelOpt: optimizing softmax_kernel — iteration 2/4 · best 1.8x');
  const two = [...one, { token: '2', title: 'AccelOpt: optimizing matmul_kernel', cancellable: true }];
  const view = statusView('local', 'running', two);
  assert.equal(view.text, '$(sync~spin) AccelOpt: 2 running');
  assert.match(view.tooltip, /optimizing matmul_kernel/);
  assert.match(view.tooltip, /AccelOpt target: local/);
  const missing = statusView('local', 'not-installed', [], 'install it with ...');
  assert.equal(missing.warning, true);
  assert.equal(missing.tooltip, 'install it with ...');
  const fromFile = statusView('ssh://gpu-box', 'running', [], undefined, 'project file /ws/pyproject.toml');
  assert.equal(fromFile.text, '$(zap) AccelOpt: ssh://gpu-box');
  assert.match(fromFile.tooltip, /^AccelOpt target: ssh:\/\/gpu-box \(from the project file \/ws\/pyproject.toml\)/);
  assert.match(statusView('local', 'running', [], undefined, 'default').tooltip, /^AccelOpt target: local\n/);
});

test('the status bar item follows progress and points its click at the job list', () => {
  standin.reset();
  const tracker = new JobTracker();
  const bar = new StatusBar(tracker);
  const item = standin.statusItems[0];
  assert.equal(item.visible, true);
  bar.setServer('running');
  bar.setTarget('ray://head:10001');
  assert.equal(item.text, '$(zap) AccelOpt: ray://head:10001');
  assert.equal(item.command, 'accelopt.showJobs');
  tracker.apply('a', { kind: 'begin', title: 'AccelOpt: optimizing softmax_kernel', cancellable: true });
  tracker.apply('a', { kind: 'report', message: 'iteration 1/2 · best 1.2x' });
  assert.equal(item.text, '$(sync~spin) AccelOpt: optimizing softmax_kernel — iteration 1/2 · best 1.2x');
  tracker.apply('a', { kind: 'end' });
  assert.equal(item.text, '$(zap) AccelOpt: ray://head:10001');
  bar.setServer('not-installed', 'AccelOpt: ... Install it with: python3 -m pip install "accelopt[triton]"');
  assert.equal(item.command, 'accelopt.showLogs');
  assert.ok(item.backgroundColor);
  bar.dispose();
  assert.equal(item.disposed, true);
});

test('AccelOpt progress becomes a cancellable notification; Cancel sends window/workDoneProgress/cancel', async () => {
  standin.reset();
  const tracker = new JobTracker();
  const cancelled: (string | number)[] = [];
  const passed: string[] = [];
  const p = new ProgressNotifications(tracker, (token) => cancelled.push(token));
  const next = (what: string) => () => passed.push(what);
  p.handle('job-1', { kind: 'begin', title: 'AccelOpt: optimizing softmax_kernel', cancellable: true, percentage: 0 }, next('begin'));
  await tick();
  assert.equal(standin.progress.length, 1);
  const call = standin.progress[0];
  assert.equal(call.options.location, ProgressLocation.Notification);
  assert.equal(call.options.cancellable, true);
  assert.equal(call.options.title, 'AccelOpt: optimizing softmax_kernel');
  p.handle('job-1', { kind: 'report', message: 'iteration 1/4 · best 1.1x', percentage: 25 }, next('report'));
  p.handle('job-1', { kind: 'report', message: 'iteration 2/4 · best 1.8x', percentage: 50 }, next('report'));
  assert.deepEqual(call.reports.slice(-2), [
    { message: 'iteration 1/4 · best 1.1x', increment: 25 },
    { message: 'iteration 2/4 · best 1.8x', increment: 25 },
  ]);
  assert.deepEqual(passed, [], "the client's own window progress is not shown twice");
  call.cancel();
  assert.deepEqual(cancelled, ['job-1']);
  p.handle('job-1', { kind: 'end', message: 'cancelled' }, next('end'));
  await tick();
  assert.equal(call.done, true);
  assert.deepEqual(passed, ['end'], "end reaches the client's ProgressPart so it disposes");
  assert.deepEqual(tracker.list(), []);
});

test('other progress passes through untouched; an end before the notification opens closes it', async () => {
  standin.reset();
  const passed: string[] = [];
  const p = new ProgressNotifications(new JobTracker(), () => undefined);
  p.handle(3, { kind: 'begin', title: 'Indexing' }, () => passed.push('begin'));
  p.handle(3, { kind: 'end' }, () => passed.push('end'));
  assert.deepEqual(passed, ['begin', 'end']);
  assert.equal(standin.progress.length, 0);
  p.handle('quick', { kind: 'begin', title: 'AccelOpt: profiling k' }, () => undefined);
  p.handle('quick', { kind: 'end' }, () => undefined);
  await tick();
  assert.equal(standin.progress.length, 1);
  assert.equal(standin.progress[0].done, true);
  assert.equal(standin.progress[0].options.cancellable, false);
});

test('listJobs replies are validated and labelled for the quick pick', () => {
  const jobs = parseJobs([
    { jobId: 'j1', uri: 'file:///w/soft%20max.py', kernel: 'softmax_kernel', state: 'running', iteration: 2, iterations: 4, bestSpeedup: 1.8 },
    { jobId: 2, kernel: 'mm', state: 'done', bestSpeedup: null },
    { kernel: 'no id' },
    'junk',
  ]);
  assert.equal(jobs.length, 2);
  assert.deepEqual(jobLabel(jobs[0]), {
    label: 'softmax_kernel',
    description: 'running · iteration 2/4 · best 1.80x',
    detail: 'soft max.py',
  });
  assert.equal(jobs[1].jobId, '2');
  assert.equal(isRunning(jobs[0]), true);
  assert.equal(isRunning(jobs[1]), false);
  assert.deepEqual(parseJobs({ not: 'a list' }), []);
});
