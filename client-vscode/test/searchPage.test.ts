import assert from 'node:assert/strict';
import { test } from 'node:test';
import { assetDirs, makeNonce, parseSearchNotice, parseSearchView, searchPageHtml, viewKey } from '../src/searchPage';

const page = (title = 'Search: softmax_kernel') =>
  searchPageHtml({
    cspSource: 'https://file+.vscode-resource.vscode-cdn.net',
    nonce: 'N0nce',
    plotly: 'https://file+.vscode-resource.vscode-cdn.net/site/plotly/package_data/plotly.min.js',
    script: 'https://file+.vscode-resource.vscode-cdn.net/pkg/accelopt_core/report/assets/view.js',
    style: 'https://file+.vscode-resource.vscode-cdn.net/pkg/accelopt_core/report/assets/view.css',
    title,
  });

test('the webview page: a nonce on every script, nothing remote, nothing inline to run', () => {
  const html = page();
  const csp = /<meta http-equiv="Content-Security-Policy" content="([^"]+)">/.exec(html)?.[1] ?? '';
  assert.match(csp, /^default-src 'none'; /);
  assert.match(csp, /script-src 'nonce-N0nce'(;|$)/);
  assert.doesNotMatch(csp, /unsafe-eval|script-src[^;]*unsafe-inline|https?:\/\/(?!file\+)/);
  const scripts = [...html.matchAll(/<script\b([^>]*)>([^<]*)<\/script>/g)];
  assert.equal(scripts.length, 2);
  for (const [, attrs, body] of scripts) {
    assert.match(attrs, /nonce="N0nce" src="https:\/\/file\+\.vscode-resource/);
    assert.equal(body, '', 'no inline script');
  }
  assert.match(html, /<main id="app"/);
});

test('a hostile kernel name stays text in the title', () => {
  const html = page('Search: </title><script>alert(1)</script>');
  assert.match(html, /<title>Search: &lt;\/title&gt;&lt;script&gt;alert\(1\)&lt;\/script&gt;<\/title>/);
  assert.equal([...html.matchAll(/<script\b/g)].length, 2);
});

test('nonces differ and use only letters and digits; assets give the resource roots', () => {
  const a = makeNonce();
  assert.match(a, /^[A-Za-z0-9]{32}$/);
  assert.notEqual(a, makeNonce());
  assert.deepEqual(assetDirs({ plotly: '/site/plotly/package_data/plotly.min.js', script: '/pkg/assets/view.js', style: '/pkg/assets/view.css' }), [
    '/site/plotly/package_data',
    '/pkg/assets',
  ]);
});

test('the server replies and notifications are validated', () => {
  const reply = parseSearchView({
    uri: 'file:///k.py',
    kernel: 'softmax_kernel',
    jobId: 'job-1',
    running: true,
    view: { nodes: [] },
    assets: { plotly: '/p.js', script: '/v.js', style: '/v.css' },
    actions: { abc: { title: 'AccelOpt: 2.00x faster — x', previewTitle: 'AccelOpt: preview 2.00x faster — x' }, bad: { title: 1 } },
  });
  assert.equal(reply?.jobId, 'job-1');
  assert.deepEqual(Object.keys(reply?.actions ?? {}), ['abc']);
  assert.equal(parseSearchView({ uri: 'u', kernel: 'k', view: null, assets: null, message: 'no search' })?.message, 'no search');
  assert.equal(parseSearchView({ kernel: 'k' }), undefined);
  assert.ok(parseSearchNotice({ uri: 'u', kernel: 'k', jobId: 'j', delta: { nodes: [] } })?.delta);
  assert.ok(parseSearchNotice({ uri: 'u', kernel: 'k', jobId: 'j', view: {}, actions: {} })?.view);
  assert.equal(parseSearchNotice({ uri: 'u', kernel: 'k', jobId: 'j' }), undefined);
  assert.notEqual(viewKey('a', 'bc'), viewKey('ab', 'c'));
});
