/**
 * TEST DOUBLE: a small stand-in for the `vscode` module (VS Code cannot be downloaded on the
 * test machines). esbuild aliases `vscode` to this file when it bundles the unit tests. It
 * implements only what the modules under test call, records what they did in `standin`, and
 * resolves configuration like VS Code does: workspace-folder, workspace and user values over the
 * defaults from package.json, each level visible through `inspect`.
 */
import * as pkg from '../../package.json';

type Listener<T> = (e: T) => void;

export class EventEmitter<T> {
  private listeners = new Set<Listener<T>>();
  event = (listener: Listener<T>) => {
    this.listeners.add(listener);
    return { dispose: () => this.listeners.delete(listener) };
  };
  fire(value: T): void {
    for (const l of [...this.listeners]) {
      l(value);
    }
  }
  dispose(): void {
    this.listeners.clear();
  }
}

export class Uri {
  private constructor(
    readonly scheme: string,
    readonly path: string,
  ) {}
  get fsPath(): string {
    return this.path;
  }
  static file(path: string): Uri {
    return new Uri('file', path);
  }
  static parse(value: string): Uri {
    const m = /^([a-z][\w+.-]*):(?:\/\/)?(.*)$/i.exec(value);
    return m ? new Uri(m[1], decodeURIComponent(m[2])) : new Uri('file', value);
  }
  static from(c: { scheme: string; path: string }): Uri {
    return new Uri(c.scheme, c.path);
  }
  toString(): string {
    return `${this.scheme}://${this.path}`;
  }
}

// ---- Enough of the API for the real vscode-languageclient to load and run (client.e2e test) ----

const noopDisposable = () => ({ dispose: () => undefined });

/** Unknown `onDid*` / `onWill*` events and `register*` / `create*` functions become no-ops. */
function withFallback<T extends object>(ns: T): T {
  return new Proxy(ns, {
    get(target, prop, receiver) {
      if (Reflect.has(target, prop) || typeof prop !== 'string') {
        return Reflect.get(target, prop, receiver);
      }
      if (/^on(Did|Will)/.test(prop) || /^register/.test(prop)) {
        return noopDisposable;
      }
      return undefined;
    },
  });
}

export class Disposable {
  constructor(private readonly fn: () => void) {}
  static from(...items: { dispose(): unknown }[]): Disposable {
    return new Disposable(() => items.forEach((i) => i.dispose()));
  }
  dispose(): void {
    this.fn();
  }
}

export class Position {
  constructor(
    readonly line: number,
    readonly character: number,
  ) {}
}

export class Range {
  constructor(
    readonly start: Position,
    readonly end: Position,
  ) {}
}

export class CodeLens {
  constructor(
    public range: Range,
    public command?: unknown,
  ) {}
}
export class CodeAction {
  constructor(
    public title: string,
    public kind?: unknown,
  ) {}
}
export class Diagnostic {
  constructor(
    public range: Range,
    public message: string,
    public severity?: number,
  ) {}
}
export class CompletionItem {
  constructor(public label: unknown) {}
}
export class DocumentLink {
  constructor(public range: Range) {}
}
export class InlayHint {
  constructor(public position: Position) {}
}
export class SymbolInformation {
  constructor(public name: string) {}
}
export class CallHierarchyItem {
  constructor(public name: string) {}
}
export class TypeHierarchyItem {
  constructor(public name: string) {}
}
export class CancellationError extends Error {}
export class CancellationTokenSource {
  private readonly emitter = new EventEmitter<void>();
  readonly token = { isCancellationRequested: false, onCancellationRequested: this.emitter.event };
  cancel(): void {
    this.token.isCancellationRequested = true;
    this.emitter.fire();
  }
  dispose(): void {
    this.emitter.dispose();
  }
}
export class CodeActionKind {
  static readonly Empty = new CodeActionKind('');
  static readonly QuickFix = new CodeActionKind('quickfix');
  static readonly Refactor = new CodeActionKind('refactor');
  static readonly RefactorExtract = new CodeActionKind('refactor.extract');
  static readonly RefactorInline = new CodeActionKind('refactor.inline');
  static readonly RefactorRewrite = new CodeActionKind('refactor.rewrite');
  static readonly Source = new CodeActionKind('source');
  static readonly SourceOrganizeImports = new CodeActionKind('source.organizeImports');
  static readonly SourceFixAll = new CodeActionKind('source.fixAll');
  constructor(readonly value: string) {}
  append(part: string): CodeActionKind {
    return new CodeActionKind(this.value ? `${this.value}.${part}` : part);
  }
}
export class MarkdownString {
  constructor(public value = '') {}
}
export enum DiagnosticSeverity {
  Error = 0,
  Warning = 1,
  Information = 2,
  Hint = 3,
}

export class ThemeColor {
  constructor(readonly id: string) {}
}

export enum StatusBarAlignment {
  Left = 1,
  Right = 2,
}

export enum ProgressLocation {
  SourceControl = 1,
  Window = 10,
  Notification = 15,
}

/** One window.withProgress call as recorded by the stand-in. */
export interface ProgressCall {
  options: { location: ProgressLocation; title?: string; cancellable?: boolean };
  reports: { message?: string; increment?: number }[];
  cancel(): void;
  done: boolean;
}

export interface FakeStatusBarItem {
  id: string;
  text: string;
  tooltip?: string;
  command?: string;
  name?: string;
  backgroundColor?: ThemeColor;
  visible: boolean;
  disposed: boolean;
  show(): void;
  hide(): void;
  dispose(): void;
}

/** One settings level: values by full key (`accelopt.search.beamWidth`). */
type Level = Map<string, unknown>;

const defaults: Level = new Map();
for (const [key, prop] of Object.entries(pkg.contributes.configuration.properties as Record<string, { default?: unknown }>)) {
  defaults.set(key, prop.default);
}

/** What the code under test did, and knobs the tests set. */
export const standin = {
  /** User settings by full key (`accelopt.search.beamWidth`); unset keys give package.json defaults. */
  settings: new Map<string, unknown>(),
  /** Workspace settings by full key (beat user settings). */
  workspaceSettings: new Map<string, unknown>(),
  /** Workspace-folder settings by the folder's path, then full key (beat workspace settings). */
  folderSettings: new Map<string, Map<string, unknown>>(),
  /** Every WorkspaceConfiguration.update call. */
  configUpdates: [] as { key: string; value: unknown }[],
  /** Installed extensions by id. */
  extensions: new Map<string, unknown>(),
  statusItems: [] as FakeStatusBarItem[],
  progress: [] as ProgressCall[],
  messages: [] as { severity: string; text: string }[],
  logLines: [] as string[],
  workspaceFolders: undefined as { uri: Uri; name: string; index: number }[] | undefined,
  /** Open documents (workspace.textDocuments). */
  textDocuments: [] as unknown[],
  reset(): void {
    this.textDocuments.length = 0;
    this.settings.clear();
    this.workspaceSettings.clear();
    this.folderSettings.clear();
    this.configUpdates.length = 0;
    this.extensions.clear();
    this.statusItems.length = 0;
    this.progress.length = 0;
    this.messages.length = 0;
    this.logLines.length = 0;
    this.workspaceFolders = undefined;
  },
};

/** The value of `full` in the first level that has it, or the nested object of a section prefix. */
function lookup(full: string, levels: Level[]): unknown {
  for (const level of levels) {
    if (level.has(full)) {
      return level.get(full);
    }
  }
  // A section prefix: the nested object of everything below it, as VS Code returns.
  const out: Record<string, unknown> = {};
  let found = false;
  const keys = new Set(levels.flatMap((level) => [...level.keys()]));
  for (const key of keys) {
    if (key.startsWith(`${full}.`)) {
      found = true;
      const parts = key.slice(full.length + 1).split('.');
      let node = out;
      for (const p of parts.slice(0, -1)) {
        node[p] = (node[p] as Record<string, unknown>) ?? {};
        node = node[p] as Record<string, unknown>;
      }
      node[parts[parts.length - 1]] = lookup(key, levels);
    }
  }
  return found ? out : undefined;
}

/** The settings of the workspace folder holding `scope` (a Uri or `{uri, languageId}`), if any. */
function folderLevel(scope: unknown): Level | undefined {
  const uri = scope instanceof Uri ? scope : (scope as { uri?: unknown } | null | undefined)?.uri;
  if (!(uri instanceof Uri)) {
    return undefined;
  }
  const folder = standin.workspaceFolders?.find((f) => uri.path.startsWith(f.uri.path));
  return folder ? standin.folderSettings.get(folder.uri.path) : undefined;
}

export const workspace = withFallback({
  get textDocuments() {
    return standin.textDocuments;
  },
  /** Like VS Code: a value resolves workspace folder (of `scope`) > workspace > user > default. */
  getConfiguration(section?: string, scope?: unknown) {
    const prefix = section ? `${section}.` : '';
    const folder = folderLevel(scope);
    const levels = [folder, standin.workspaceSettings, standin.settings, defaults].filter((l): l is Level => !!l);
    return {
      get<T>(key: string, fallback?: T): T | undefined {
        const value = lookup(prefix + key, levels) as T | undefined;
        return value === undefined ? fallback : value;
      },
      has(key: string): boolean {
        return lookup(prefix + key, levels) !== undefined;
      },
      inspect(key: string) {
        const full = prefix + key;
        const at = (level: Level | undefined) => (level ? lookup(full, [level]) : undefined);
        return {
          key: full,
          defaultValue: at(defaults),
          globalValue: at(standin.settings),
          workspaceValue: at(standin.workspaceSettings),
          workspaceFolderValue: at(folder),
        };
      },
      async update(key: string, value: unknown): Promise<void> {
        standin.configUpdates.push({ key: prefix + key, value });
        standin.settings.set(prefix + key, value);
      },
    };
  },
  get workspaceFolders() {
    return standin.workspaceFolders;
  },
  getWorkspaceFolder(uri: Uri) {
    return standin.workspaceFolders?.find((f) => uri.path.startsWith(f.uri.path));
  },
});

export const extensions = {
  getExtension(id: string) {
    return standin.extensions.get(id);
  },
};

function record(severity: string) {
  return async (text: string): Promise<undefined> => {
    standin.messages.push({ severity, text });
    return undefined;
  };
}

export const window = withFallback({
  createStatusBarItem(id: string): FakeStatusBarItem {
    const item: FakeStatusBarItem = {
      id,
      text: '',
      visible: false,
      disposed: false,
      show() {
        item.visible = true;
      },
      hide() {
        item.visible = false;
      },
      dispose() {
        item.disposed = true;
      },
    };
    standin.statusItems.push(item);
    return item;
  },
  withProgress<R>(
    options: ProgressCall['options'],
    task: (
      progress: { report(v: { message?: string; increment?: number }): void },
      token: { isCancellationRequested: boolean; onCancellationRequested: (l: () => void) => { dispose(): void } },
    ) => Promise<R>,
  ): Promise<R> {
    const cancelled = new EventEmitter<void>();
    const token = {
      isCancellationRequested: false,
      onCancellationRequested: (l: () => void) => cancelled.event(l),
    };
    const call: ProgressCall = {
      options,
      reports: [],
      done: false,
      cancel() {
        token.isCancellationRequested = true;
        cancelled.fire();
      },
    };
    standin.progress.push(call);
    const result = task({ report: (v) => call.reports.push(v) }, token);
    void result.then(() => {
      call.done = true;
    });
    return result;
  },
  createOutputChannel(name: string) {
    const line = (level: string) => (text: string) => standin.logLines.push(`[${level}] ${text}`);
    return {
      name,
      info: line('info'),
      warn: line('warn'),
      error: line('error'),
      debug: line('debug'),
      trace: line('trace'),
      append: (text: string) => standin.logLines.push(text),
      appendLine: (text: string) => standin.logLines.push(text),
      show() {},
      dispose() {},
    };
  },
  showInformationMessage: record('info'),
  showWarningMessage: record('warning'),
  showErrorMessage: record('error'),
  activeTextEditor: undefined,
  visibleTextEditors: [] as unknown[],
});

/** The VS Code version the stand-in claims (vscode-languageclient 9 checks it). */
export const version = '1.82.0';

/** Commands registered with the stand-in, by id. */
export const registeredCommands = new Map<string, (...args: unknown[]) => unknown>();

export const commands = withFallback({
  registerCommand(id: string, fn: (...args: unknown[]) => unknown) {
    if (registeredCommands.has(id)) {
      throw new Error(`command '${id}' already exists`);
    }
    registeredCommands.set(id, fn);
    return { dispose: () => registeredCommands.delete(id) };
  },
  async executeCommand(id: string, ...args: unknown[]) {
    const fn = registeredCommands.get(id);
    if (!fn) {
      throw new Error(`command '${id}' not found`);
    }
    return fn(...args);
  },
});

export const languages = withFallback({
  match: () => 10,
  createDiagnosticCollection: () => ({
    set() {},
    delete() {},
    clear() {},
    forEach() {},
    dispose() {},
  }),
});

export const env = withFallback({
  appName: 'AccelOpt stand-in',
  language: 'en',
  machineId: 'stand-in',
  clipboard: { writeText: async () => undefined },
});
