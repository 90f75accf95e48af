// Bundles the extension (dist/extension.js) or, with --tests, each unit test (out/test/*.test.js)
// with the `vscode` module replaced by the stand-in in test/standin/vscode.ts.
import { build } from 'esbuild';
import { readdirSync, rmSync } from 'node:fs';

const tests = process.argv.includes('--tests');
const common = {
  bundle: true,
  platform: 'node',
  target: 'node18',
  format: 'cjs',
  sourcemap: true,
  logLevel: 'warning',
};

if (tests) {
  rmSync('out/test', { recursive: true, force: true });
  const entryPoints = readdirSync('test')
    .filter((f) => f.endsWith('.test.ts'))
    .map((f) => `test/${f}`);
  await build({
    ...common,
    entryPoints,
    outdir: 'out/test',
    alias: { vscode: './test/standin/vscode.ts' },
  });
} else {
  await build({
    ...common,
    entryPoints: ['src/extension.ts'],
    outfile: 'dist/extension.js',
    external: ['vscode'],
    minify: process.argv.includes('--minify'),
  });
}
