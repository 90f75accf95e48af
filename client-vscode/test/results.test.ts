import assert from 'node:assert/strict';
import { test } from 'node:test';
import { kernelAt, kernelsFromLenses } from '../src/kernels';
import { describeResult, formatMs, shouldNotify } from '../src/results';

const lens = (line: number, command: string, args: unknown[]) => ({ range: { start: { line } }, command: { command, arguments: args } });

test('kernels come from the server code lenses, one per name, in line order', () => {
  const kernels = kernelsFromLenses([
    lens(40, 'accelopt.optimize', ['file:///k.py', 'matmul_kernel']),
    lens(10, 'accelopt.profile', ['file:///k.py', 'softmax_kernel']),
    lens(10, 'accelopt.optimize', ['file:///k.py', 'softmax_kernel']),
    lens(5, 'editor.action.showReferences', ['file:///k.py', 'x']),
    { range: { start: { line: 1 } } },
    lens(2, 'accelopt.optimize', ['file:///k.py']),
  ]);
  assert.deepEqual(kernels, [
    { uri: 'file:///k.py', name: 'softmax_kernel', line: 10 },
    { uri: 'file:///k.py', name: 'matmul_kernel', line: 40 },
  ]);
  assert.equal(kernelAt(kernels, 25)?.name, 'softmax_kernel', 'launcher below its kernel');
  assert.equal(kernelAt(kernels, 40)?.name, 'matmul_kernel');
  assert.equal(kernelAt(kernels, 3), undefined, 'above every kernel: ask');
  assert.equal(kernelAt([kernels[1]], 0)?.name, 'matmul_kernel', 'only one kernel');
});

test('command results become messages of the right severity', () => {
  assert.deepEqual(describeResult('accelopt.optimize', ['file:///k.py', 'softmax_kernel'], { jobId: 'j1', started: true }), {
    kind: 'message',
    severity: 'info',
    text: 'AccelOpt: optimizing softmax_kernel (job j1).',
  });
  assert.deepEqual(describeResult('accelopt.optimize', ['u', 'k'], { started: false, message: 'no harness in this file' }), {
    kind: 'message',
    severity: 'warning',
    text: 'AccelOpt: the search did not start: no harness in this file',
  });
  assert.deepEqual(describeResult('accelopt.cancel', ['j1'], { cancelled: false, message: 'j1 already finished' }), {
    kind: 'message',
    severity: 'warning',
    text: 'AccelOpt: nothing to cancel (j1 already finished).',
  });
  assert.equal(describeResult('accelopt.cancel', ['j1'], { cancelled: true })?.kind, 'message');
  const profile = describeResult('accelopt.profile', ['u'], {
    kernels: { a: { status: 'ok', latency_ms: 0.01234, summary: '' }, b: { status: 'compile_error' } },
  });
  assert.deepEqual(profile, { kind: 'message', severity: 'warning', text: 'AccelOpt: a: ok 0.0123 ms; b: compile_error' });
  assert.deepEqual(describeResult('accelopt.profile', ['u'], { kernels: { a: { status: 'ok', summary: '1.23 ms · 41% of peak' } } }), {
    kind: 'message',
    severity: 'info',
    text: 'AccelOpt: a: 1.23 ms · 41% of peak',
  });
  assert.deepEqual(describeResult('accelopt.showMemory', ['u', 'softmax_kernel'], '# Memory\n- rule'), {
    kind: 'markdown',
    title: 'AccelOpt memory — softmax_kernel',
    markdown: '# Memory\n- rule',
  });
  assert.equal(describeResult('accelopt.showMemory', ['u', 'k'], null)?.kind, 'message');
  assert.deepEqual(describeResult('accelopt.clearResults', [], { cleared: 3 }), {
    kind: 'message',
    severity: 'info',
    text: 'AccelOpt: cleared 3 results.',
  });
  assert.equal(describeResult('accelopt.listJobs', [], []), undefined);
  assert.equal(formatMs(123.4), '123 ms');
});

test('showNotifications: errors always, warnings unless off, info only with always', () => {
  assert.equal(shouldNotify('error', 'off'), true);
  assert.equal(shouldNotify('warning', 'off'), false);
  assert.equal(shouldNotify('warning', 'onError'), true);
  assert.equal(shouldNotify('info', 'onError'), false);
  assert.equal(shouldNotify('info', 'always'), true);
});
