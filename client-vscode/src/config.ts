/**
 * Settings of the `accelopt` section, read in the shape the server expects.
 *
 * Pure functions only (no `vscode` import) so that they are unit-tested as they are. The list of
 * settings comes from package.json, which scripts/gen-settings.mjs generates from the Python model
 * `accelopt_core.settings` (one source of truth).
 */
import * as pkg from '../package.json';

/** The configuration section shared by the extension and the server. */
export const SECTION = 'accelopt';

/** Settings that only the extension reads (declared in settings.extension.json). */
export const EXTENSION_ONLY = ['interpreter', 'trace.server', 'showNotifications'] as const;

/**
 * Settings (relative to `accelopt.`) whose change restarts the server: the interpreter, and
 * what the server reads once at start (target and its connection, evaluation pool, LLM
 * endpoint, memory location, log level). Search parameters, profileOnSave and maxCodeActions
 * are pulled by the server with workspace/configuration whenever they are used.
 */
export const RESTART_SETTINGS = [
  'interpreter',
  'target',
  'ssh',
  'evaluation',
  'llm',
  'memoryDir',
  'logLevel',
] as const;

/** Reads one setting by its key relative to the section (`search.beamWidth`). */
export interface ConfigReader {
  get<T>(key: string): T | undefined;
}

/** The keys (relative to `accelopt.`) of every contributed setting, in package.json order. */
export function settingKeys(): string[] {
  const props = (pkg.contributes.configuration.properties ?? {}) as Record<string, unknown>;
  return Object.keys(props).map((k) => k.slice(SECTION.length + 1));
}

/**
 * The settings `read` gives as one nested camelCase object
 * (`{search: {beamWidth: 2}, llm: {planner: {model: ...}}}`). Unset (null/undefined) values are
 * left out so the server applies its own layers. Given VS Code's `get` this would include every
 * package.json default: the server is sent {@link userSection} instead.
 */
export function nestedSection(read: ConfigReader, keys: string[] = settingKeys()): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const key of keys) {
    const value = read.get<unknown>(key);
    if (value === undefined || value === null) {
      continue;
    }
    const parts = key.split('.');
    let node = out;
    for (const part of parts.slice(0, -1)) {
      const next = node[part];
      if (typeof next !== 'object' || next === null || Array.isArray(next)) {
        node[part] = {};
      }
      node = node[part] as Record<string, unknown>;
    }
    node[parts[parts.length - 1]] = value;
  }
  return out;
}

/**
 * What `WorkspaceConfiguration.inspect(key)` reports for one setting: its value at each level
 * VS Code knows (the `*LanguageValue` ones are language-specific overrides).
 */
export interface InspectedSetting {
  defaultValue?: unknown;
  globalValue?: unknown;
  workspaceValue?: unknown;
  workspaceFolderValue?: unknown;
  globalLanguageValue?: unknown;
  workspaceLanguageValue?: unknown;
  workspaceFolderLanguageValue?: unknown;
}

/** Inspects one setting by its key relative to the section (VS Code's WorkspaceConfiguration). */
export interface ConfigInspector {
  inspect(key: string): InspectedSetting | undefined;
}

/**
 * The value the user actually set for one setting, never the default: the first level that
 * holds a value, narrowest first (workspace folder, workspace, user). Language-specific values
 * come before all of them, as VS Code documents ("language-specific settings override
 * non-language-specific ones, even of a narrower scope"). Undefined when only the default exists.
 */
export function userValue(inspected: InspectedSetting | undefined): unknown {
  if (!inspected) {
    return undefined;
  }
  const levels = [
    inspected.workspaceFolderLanguageValue,
    inspected.workspaceLanguageValue,
    inspected.globalLanguageValue,
    inspected.workspaceFolderValue,
    inspected.workspaceValue,
    inspected.globalValue,
  ];
  return levels.find((value) => value !== undefined);
}

/**
 * The `accelopt` settings the user set (no package.json defaults) as the nested object the server
 * reads, so that the server's lower layers (project file, user config, its own defaults) apply
 * to every key the user left alone. Sent in initializationOptions and in answers to
 * workspace/configuration.
 */
export function userSection(config: ConfigInspector, keys: string[] = settingKeys()): Record<string, unknown> {
  return nestedSection({ get: <T>(key: string) => userValue(config.inspect(key)) as T | undefined }, keys);
}

/** Values substituted in `accelopt.interpreter`. */
export interface PathVariables {
  workspaceFolder?: string;
  userHome: string;
  env: Record<string, string | undefined>;
}

/**
 * Substitutes `${workspaceFolder}`, `${userHome}`, `${env:NAME}` and a leading `~` in one
 * interpreter argument. An unknown `${...}` is kept as written.
 */
export function substituteVariables(value: string, vars: PathVariables): string {
  let out = value.replace(/\$\{([^}]+)\}/g, (whole, name: string) => {
    if (name === 'workspaceFolder') {
      return vars.workspaceFolder ?? whole;
    }
    if (name === 'userHome') {
      return vars.userHome;
    }
    if (name.startsWith('env:')) {
      return vars.env[name.slice(4)] ?? '';
    }
    return whole;
  });
  if (out === '~' || out.startsWith('~/') || out.startsWith('~\\')) {
    out = vars.userHome + out.slice(1);
  }
  return out;
}

/**
 * The `accelopt.interpreter` setting as an argv prefix, or undefined when it is unset/empty.
 * Accepts a string (`"/venv/bin/python"`) or an array of strings (`["conda", "run", "python"]`);
 * blank entries are dropped. Other types count as unset.
 */
export function interpreterFromSetting(value: unknown, vars: PathVariables): string[] | undefined {
  let parts: string[];
  if (typeof value === 'string') {
    parts = [value];
  } else if (Array.isArray(value) && value.every((v) => typeof v === 'string')) {
    parts = value as string[];
  } else {
    return undefined;
  }
  const out = parts.map((p) => substituteVariables(p.trim(), vars)).filter((p) => p.length > 0);
  return out.length ? out : undefined;
}

/** What VS Code's ConfigurationChangeEvent offers. */
export interface ChangeEvent {
  affectsConfiguration(section: string): boolean;
}

/** The first server-affecting setting the change touches (`accelopt.llm`), else undefined. */
export function restartTrigger(event: ChangeEvent): string | undefined {
  for (const key of RESTART_SETTINGS) {
    const full = `${SECTION}.${key}`;
    if (event.affectsConfiguration(full)) {
      return full;
    }
  }
  return undefined;
}

/** When command results show as notifications (`accelopt.showNotifications`). */
export type NotificationLevel = 'off' | 'onError' | 'always';

/** The `accelopt.showNotifications` value, `onError` when unset or invalid. */
export function notificationLevel(read: ConfigReader): NotificationLevel {
  const value = read.get<string>('showNotifications');
  return value === 'off' || value === 'always' ? value : 'onError';
}

/**
 * Collapses bursts of calls (several settings changed at once) into one call of `fn`
 * `delayMs` (milliseconds) after the last one. `timers` is injectable for tests.
 */
export class Debouncer {
  private handle: unknown;
  private reasons: string[] = [];

  constructor(
    private readonly delayMs: number,
    private readonly fn: (reasons: string[]) => void,
    private readonly timers: {
      set(cb: () => void, ms: number): unknown;
      clear(handle: unknown): void;
    } = {
      set: (cb, ms) => setTimeout(cb, ms),
      clear: (h) => clearTimeout(h as NodeJS.Timeout),
    },
  ) {}

  /** Schedules the call, remembering why. */
  trigger(reason: string): void {
    if (!this.reasons.includes(reason)) {
      this.reasons.push(reason);
    }
    if (this.handle !== undefined) {
      this.timers.clear(this.handle);
    }
    this.handle = this.timers.set(() => {
      const reasons = this.reasons;
      this.reasons = [];
      this.handle = undefined;
      this.fn(reasons);
    }, this.delayMs);
  }

  /** Drops a pending call. */
  dispose(): void {
    if (this.handle !== undefined) {
      this.timers.clear(this.handle);
      this.handle = undefined;
    }
    this.reasons = [];
  }
}

/** The server command that answers the effective settings (`[uri?]`). */
export const SHOW_SETTINGS_COMMAND = 'accelopt.showSettings';

/** The target the server uses, and the layer that set it (`project file /ws/pyproject.toml`). */
export interface EffectiveTarget {
  target: string;
  source: string;
}

/**
 * The effective target from the server's `accelopt.showSettings` answer
 * (`{target, targetSource, ...}`): the editor settings over the project file
 * (`[tool.accelopt]` in pyproject.toml, accelopt.toml) over the user config. Undefined for
 * anything else (an older server without the command, a failed request).
 */
export function effectiveTarget(answer: unknown): EffectiveTarget | undefined {
  if (typeof answer !== 'object' || answer === null) {
    return undefined;
  }
  const { target, targetSource } = answer as Record<string, unknown>;
  if (typeof target !== 'string' || target === '') {
    return undefined;
  }
  return { target, source: typeof targetSource === 'string' ? targetSource : 'default' };
}

/** The settings files the server reads besides the editor settings (by file name). */
export const SETTINGS_FILES = ['pyproject.toml', 'accelopt.toml'] as const;

/** Whether `path` (a file system path or URI path) is one of {@link SETTINGS_FILES}. */
export function isSettingsFile(path: string): boolean {
  const name = path.split(/[\\/]/).pop() ?? '';
  return (SETTINGS_FILES as readonly string[]).includes(name);
}
