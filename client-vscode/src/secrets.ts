/**
 * API keys: kept in VS Code's SecretStorage and handed to the server process as environment
 * variables named by the settings (`accelopt.llm.apiKeyEnv`, default OPENAI_API_KEY, and the
 * per-role `accelopt.llm.<role>.apiKeyEnv` overrides). A key is never written to settings and
 * never logged: log lines name the variable and where its value came from, nothing more.
 *
 * No `vscode` import: SecretStorage and the prompts are passed in.
 */
import type { ConfigReader } from './config';

/** The roles that may name their own key variable (accelopt_core.settings.LLMSettings). */
export const ROLES = ['planner', 'executor', 'summarizer', 'fixer'] as const;
/** Default of `accelopt.llm.apiKeyEnv` in the settings model. */
export const DEFAULT_KEY_ENV = 'OPENAI_API_KEY';

/** The part of vscode.SecretStorage used here. */
export interface SecretStore {
  get(key: string): PromiseLike<string | undefined>;
  store(key: string, value: string): PromiseLike<void>;
  delete(key: string): PromiseLike<void>;
}

/** Where a variable's value for the server comes from. */
export type KeySource = 'secret-storage' | 'environment' | 'missing';

/** A valid environment variable name (letters, digits, underscore; not starting with a digit). */
export function isValidEnvName(name: string): boolean {
  return /^[A-Za-z_][A-Za-z0-9_]*$/.test(name);
}

/** The SecretStorage key under which the value of variable `envName` is stored. */
export function secretKey(envName: string): string {
  return `accelopt.apiKey.${envName}`;
}

/**
 * The distinct key variable names the settings use: the shared one first, then the role
 * overrides. Invalid names are skipped (the server reports bad settings itself).
 */
export function apiKeyEnvNames(read: ConfigReader): string[] {
  const names = [read.get<string>('llm.apiKeyEnv') || DEFAULT_KEY_ENV];
  for (const role of ROLES) {
    const name = read.get<string | null>(`llm.${role}.apiKeyEnv`);
    if (name) {
      names.push(name);
    }
  }
  return [...new Set(names.map((n) => n.trim()))].filter(isValidEnvName);
}

/**
 * The stored keys for `names` as environment variables, and where each name's value will come
 * from (a stored key wins over the inherited environment, since the user set it here).
 */
export async function secretEnv(
  store: SecretStore,
  names: string[],
  baseEnv: Record<string, string | undefined>,
): Promise<{ env: Record<string, string>; sources: Record<string, KeySource> }> {
  const env: Record<string, string> = {};
  const sources: Record<string, KeySource> = {};
  for (const name of names) {
    const value = await store.get(secretKey(name));
    if (value) {
      env[name] = value;
      sources[name] = 'secret-storage';
    } else {
      sources[name] = baseEnv[name] ? 'environment' : 'missing';
    }
  }
  return { env, sources };
}

/** One log line per variable naming its source, never its value. */
export function describeKeySources(sources: Record<string, KeySource>): string[] {
  const text: Record<KeySource, string> = {
    'secret-storage': 'from VS Code SecretStorage',
    environment: 'from the environment VS Code was started in',
    missing: 'not set (LLM calls needing it will fail; run "AccelOpt: Set API Key")',
  };
  return Object.entries(sources).map(([name, source]) => `API key ${name}: ${text[source]}`);
}

/** Replaces every occurrence of each secret in `text` with `***`. */
export function redact(text: string, secrets: string[]): string {
  let out = text;
  for (const secret of secrets) {
    if (secret) {
      out = out.split(secret).join('***');
    }
  }
  return out;
}

/** The prompts of the Set API Key command. */
export interface KeyPrompts {
  /** Choose one of several variable names; undefined when dismissed. */
  pickName(names: string[]): PromiseLike<string | undefined>;
  /** Ask for the key (a password box); undefined when dismissed, '' to remove it. */
  askKey(name: string): PromiseLike<string | undefined>;
}

/** What the Set API Key command did. */
export type SetKeyOutcome =
  | { action: 'stored' | 'deleted'; name: string }
  | { action: 'dismissed' };

/**
 * The Set API Key flow: pick the variable (when the settings name several), ask for the key,
 * store it in SecretStorage (an empty answer deletes it). Logs the variable name only.
 */
export async function setApiKey(
  store: SecretStore,
  names: string[],
  prompts: KeyPrompts,
  log: (line: string) => void,
): Promise<SetKeyOutcome> {
  const choices = names.length ? names : [DEFAULT_KEY_ENV];
  const name = choices.length === 1 ? choices[0] : await prompts.pickName(choices);
  if (!name) {
    return { action: 'dismissed' };
  }
  const key = await prompts.askKey(name);
  if (key === undefined) {
    return { action: 'dismissed' };
  }
  const trimmed = key.trim();
  if (!trimmed) {
    await store.delete(secretKey(name));
    log(`Removed the stored API key for ${name}.`);
    return { action: 'deleted', name };
  }
  await store.store(secretKey(name), trimmed);
  log(`Stored the API key for ${name} in VS Code SecretStorage.`);
  return { action: 'stored', name };
}

/**
 * Wraps a log/output channel so that every string argument of every method call (append,
 * appendLine, info, warn, error, trace, replace...) has the current secrets replaced by `***`.
 * Guards against a server or library that echoes its environment into the log.
 */
export function redactingChannel<T extends object>(channel: T, secrets: () => Iterable<string>): T {
  return new Proxy(channel, {
    get(target, prop, receiver) {
      const value = Reflect.get(target, prop, receiver);
      if (typeof value !== 'function') {
        return value;
      }
      return (...args: unknown[]) => {
        const known = [...secrets()];
        return value.apply(
          target,
          args.map((a) => (typeof a === 'string' && known.length ? redact(a, known) : a)),
        );
      };
    },
  });
}
