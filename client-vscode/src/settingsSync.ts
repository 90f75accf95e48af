/**
 * What the language client tells the server about the `accelopt` settings: only the values the
 * user set, per scope, never package.json's defaults. The server merges the editor's settings
 * over the project file (`[tool.accelopt]` in pyproject.toml, or accelopt.toml) and the user
 * config, so a default sent from here would hide the project file for every key.
 *
 * Three paths carry settings to the server, and each is covered here:
 * - initializationOptions: {@link initialSettings};
 * - answers to `workspace/configuration`: {@link settingsMiddleware}'s `configuration`;
 * - `workspace/didChangeConfiguration` pushes: {@link settingsMiddleware}'s
 *   `didChangeConfiguration` sends `settings: null` (the server pulls the scoped values again).
 */
import * as vscode from 'vscode';
import type { ConfigurationParams, ConfigurationRequest, ResponseError, WorkspaceMiddleware } from 'vscode-languageclient/node';
import { SECTION, userSection } from './config';

/** The user-set `accelopt` section for a scope URI (as in a ConfigurationItem), or unscoped. */
export type SectionForScope = (scopeUri?: string | null) => Record<string, unknown>;

/**
 * The `accelopt` settings the user set for `scopeUri` (a document or folder URI string): a
 * workspace-folder value beats a workspace value, which beats a user value. Without a scope,
 * workspace-folder values are not seen (VS Code resolves no folder).
 */
export function userSettings(scopeUri?: string | null): Record<string, unknown> {
  const scope = scopeUri ? vscode.Uri.parse(scopeUri) : undefined;
  return userSection(vscode.workspace.getConfiguration(SECTION, scope));
}

/**
 * initializationOptions: the user-set settings without a folder scope (user and workspace
 * values). The server merges them under every scope's pulled settings, so a folder's values
 * here would leak into documents of the other folders; each folder's values reach the server
 * through workspace/configuration for that folder's documents.
 */
export function initialSettings(): Record<string, unknown> {
  return userSettings(undefined);
}

/**
 * The `workspace` middleware of the language client: answers `workspace/configuration` items
 * for the `accelopt` section with `sectionFor(item.scopeUri)` and hands every other item, in
 * order, to the client's default handler (one call, skipped when there are none); pushes
 * configuration changes as `settings: null` so the server pulls them.
 */
export function settingsMiddleware(sectionFor: SectionForScope = userSettings): WorkspaceMiddleware {
  return {
    configuration: (params, token, next) => answerConfiguration(params, sectionFor, (others) => next(others, token)),
    didChangeConfiguration: (_sections, next) => next(undefined),
  };
}

type Next = (params: ConfigurationParams) => ReturnType<ConfigurationRequest.HandlerSignature>;

async function answerConfiguration(
  params: ConfigurationParams,
  sectionFor: SectionForScope,
  next: Next,
): Promise<unknown[] | ResponseError<void>> {
  const ours = params.items.map((item) => item.section === SECTION);
  if (!ours.some(Boolean)) {
    return next(params);
  }
  const others = params.items.filter((_, i) => !ours[i]);
  const passed = others.length ? await next({ items: others }) : [];
  if (!Array.isArray(passed)) {
    return passed; // a ResponseError from the default handler
  }
  let j = 0;
  return params.items.map((item, i) => (ours[i] ? sectionFor(item.scopeUri) : passed[j++]));
}
