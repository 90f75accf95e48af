/**
 * The search view's webview page and the server's messages about it (issue 32). Pure (no
 * `vscode` import): the panel (searchPanel.ts) fills in the webview's URIs.
 *
 * The page follows VS Code's webview security guidance: a content security policy that
 * allows nothing by default, scripts only with a fresh nonce (Plotly's bundle and the view's
 * script, both files of the server's Python package served as local resources), styles only
 * from those resources (plus inline style attributes, which Plotly sets on its SVG), images
 * only from them or `data:`. No remote resource can load; the view's text reaches the page as
 * data in messages and is written as text by the script.
 */

/** What `accelopt.searchView` answers (see accelopt_server/features/search_view.py). */
export interface SearchViewReply {
  uri: string;
  kernel: string;
  jobId: string | null;
  running: boolean;
  view: Record<string, unknown> | null;
  assets: { plotly: string; script: string; style: string } | null;
  actions: Record<string, { title: string; previewTitle: string }>;
  message?: string;
}

/** An `accelopt/searchView` notification: a delta of the running search, or its final view. */
export interface SearchViewNotice {
  uri: string;
  kernel: string;
  jobId: string;
  delta?: Record<string, unknown>;
  view?: Record<string, unknown>;
  actions?: Record<string, { title: string; previewTitle: string }>;
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

function actionsOf(v: unknown): Record<string, { title: string; previewTitle: string }> {
  const out: Record<string, { title: string; previewTitle: string }> = {};
  if (!isObject(v)) {
    return out;
  }
  for (const [id, a] of Object.entries(v)) {
    if (isObject(a) && typeof a.title === 'string' && typeof a.previewTitle === 'string') {
      out[id] = { title: a.title, previewTitle: a.previewTitle };
    }
  }
  return out;
}

/** Validates the reply of `accelopt.searchView`; undefined when it is not one. */
export function parseSearchView(value: unknown): SearchViewReply | undefined {
  if (!isObject(value) || typeof value.uri !== 'string' || typeof value.kernel !== 'string') {
    return undefined;
  }
  const a = value.assets;
  const assets =
    isObject(a) && typeof a.plotly === 'string' && typeof a.script === 'string' && typeof a.style === 'string'
      ? { plotly: a.plotly, script: a.script, style: a.style }
      : null;
  return {
    uri: value.uri,
    kernel: value.kernel,
    jobId: typeof value.jobId === 'string' ? value.jobId : null,
    running: value.running === true,
    view: isObject(value.view) ? value.view : null,
    assets,
    actions: actionsOf(value.actions),
    message: typeof value.message === 'string' ? value.message : undefined,
  };
}

/** Validates an `accelopt/searchView` notification; undefined when it is not one. */
export function parseSearchNotice(value: unknown): SearchViewNotice | undefined {
  if (!isObject(value) || typeof value.uri !== 'string' || typeof value.kernel !== 'string' || typeof value.jobId !== 'string') {
    return undefined;
  }
  const out: SearchViewNotice = { uri: value.uri, kernel: value.kernel, jobId: value.jobId };
  if (isObject(value.view)) {
    out.view = value.view;
    out.actions = actionsOf(value.actions);
  } else if (isObject(value.delta)) {
    out.delta = value.delta;
  } else {
    return undefined;
  }
  return out;
}

/** The key of one kernel's panel. */
export function viewKey(uri: string, kernel: string): string {
  return `${uri}\u0000${kernel}`;
}

/** 32 characters of [A-Za-z0-9] from `random` (a nonce per page). */
export function makeNonce(random: () => number = Math.random): string {
  const chars = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789';
  let out = '';
  for (let i = 0; i < 32; i++) {
    out += chars.charAt(Math.floor(random() * chars.length));
  }
  return out;
}

const escapeHtml = (s: string) =>
  s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');

/**
 * The webview's HTML. `cspSource` is `webview.cspSource`; the URIs are `webview.asWebviewUri`
 * of the reply's assets. The view itself arrives later as a message (`{type: "view"}`).
 */
export function searchPageHtml(p: { cspSource: string; nonce: string; plotly: string; script: string; style: string; title: string }): string {
  const csp = [
    "default-src 'none'",
    `img-src ${p.cspSource} data:`,
    `style-src ${p.cspSource} 'unsafe-inline'`,
    `font-src ${p.cspSource}`,
    `script-src 'nonce-${p.nonce}'`,
  ].join('; ');
  return `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="${csp}">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${escapeHtml(p.title)}</title>
<link rel="stylesheet" href="${escapeHtml(p.style)}">
</head>
<body>
<main id="app" class="accelopt-report"></main>
<script nonce="${p.nonce}" src="${escapeHtml(p.plotly)}"></script>
<script nonce="${p.nonce}" src="${escapeHtml(p.script)}"></script>
</body>
</html>
`;
}

/** The directories the webview may load from (`localResourceRoots`): those of the assets. */
export function assetDirs(assets: { plotly: string; script: string; style: string }): string[] {
  const dir = (path: string) => path.replace(/[\\/][^\\/]*$/, '') || '/';
  return [...new Set([dir(assets.plotly), dir(assets.script), dir(assets.style)])];
}
