import assert from 'node:assert/strict';
import { chmodSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import {
  executableOptions,
  installCommand,
  probeInterpreter,
  probeMessage,
  quoteArg,
  serverLaunch,
} from '../src/serverProcess';

const PYTHON = process.env.ACCELOPT_TEST_PYTHON || 'python3';

test('the server command line is <interpreter...> -m accelopt_server, with no --stdio added', () => {
  const launch = serverLaunch(['conda', 'run', '-n', 'k', 'python'], { PATH: '/bin' }, {}, '/ws');
  assert.equal(launch.command, 'conda');
  assert.deepEqual(launch.args, ['run', '-n', 'k', 'python', '-m', 'accelopt_server']);
  assert.equal(launch.cwd, '/ws');
  const exe = executableOptions(launch);
  assert.equal('transport' in exe, false, 'TransportKind.stdio would append --stdio');
  assert.deepEqual(exe.args, launch.args);
  assert.equal(exe.options.cwd, '/ws');
  assert.throws(() => serverLaunch([], {}), /empty interpreter/);
});

test('the server environment adds PYTHONUNBUFFERED and keys without touching the base env', () => {
  const base = { PATH: '/bin', OPENAI_API_KEY: 'from-shell', UNSET: undefined };
  const launch = serverLaunch(['python3'], base, { OPENAI_API_KEY: 'sk-stored' });
  assert.equal(launch.env.PATH, '/bin');
  assert.equal(launch.env.PYTHONUNBUFFERED, '1');
  assert.equal(launch.env.OPENAI_API_KEY, 'sk-stored');
  assert.equal('UNSET' in launch.env, false);
  assert.equal(base.OPENAI_API_KEY, 'from-shell');
});

test('install command quotes interpreter paths with spaces', () => {
  assert.equal(installCommand(['/usr/bin/python3'], 'linux'), '/usr/bin/python3 -m pip install "accelopt[triton]"');
  assert.equal(
    installCommand(['/home/me/my envs/bin/python'], 'linux'),
    `'/home/me/my envs/bin/python' -m pip install "accelopt[triton]"`,
  );
  assert.equal(
    installCommand(['C:\\Program Files\\Python311\\python.exe'], 'win32'),
    '"C:\\Program Files\\Python311\\python.exe" -m pip install "accelopt[triton]"',
  );
  assert.equal(quoteArg("it's", 'linux'), `'it'\\''s'`);
});

test('probe: an interpreter that does not exist is "not-found"', async () => {
  const probe = await probeInterpreter(['/nonexistent/bin/python3']);
  assert.equal(probe.ok, false);
  assert.ok(!probe.ok && probe.reason === 'not-found');
  if (!probe.ok) {
    assert.match(probeMessage(probe, ['/nonexistent/bin/python3']), /was not found.*accelopt\.interpreter/);
  }
});

test('probe: a real interpreter without the module says so, with the exact install command', async () => {
  const probe = await probeInterpreter([PYTHON], 'accelopt_no_such_module_xyz');
  assert.equal(probe.ok, false);
  if (!probe.ok) {
    assert.equal(probe.reason, 'missing-module');
    assert.match(probe.version ?? '', /^3\.\d+\.\d+$/);
    const msg = probeMessage(probe, [PYTHON]);
    assert.ok(msg.includes(`Install it with: ${PYTHON} -m pip install "accelopt[triton]"`), msg);
  }
});

test('probe: a module that exists but fails to import is "failed" with the exception', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'accelopt-probe-'));
  writeFileSync(join(dir, 'broken_mod_xyz.py'), 'import dependency_that_is_missing_xyz\n');
  // A wrapper interpreter that puts dir on sys.path, as a venv would.
  const wrapper = join(dir, 'py');
  writeFileSync(wrapper, `#!/bin/sh\nPYTHONPATH="${dir}" exec ${PYTHON} "$@"\n`);
  chmodSync(wrapper, 0o755);
  const probe = await probeInterpreter([wrapper], 'broken_mod_xyz');
  assert.equal(probe.ok, false);
  if (!probe.ok) {
    assert.equal(probe.reason, 'failed');
    assert.match(probe.detail, /dependency_that_is_missing_xyz/);
  }
});

test('probe: a real interpreter with the module is ok and reports its executable and version', async () => {
  const probe = await probeInterpreter([PYTHON], 'json');
  assert.ok(probe.ok, JSON.stringify(probe));
  if (probe.ok) {
    assert.match(probe.version, /^3\.\d+\.\d+$/);
    assert.ok(probe.executable.length > 0);
  }
});
