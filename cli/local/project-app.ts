/**
 * The project's app, as its Workers run it: `app` exported by <project root>/app/index.ts — or, for a local run, the
 * module ACKBOX_APP names (relative to the project root: ACKBOX_APP=examples/reference/index.ts npm start). Loaded at
 * run time, not imported, so the engine's commands work from a package over whichever project depends on it
 * (run-info.ts).
 */
import { isAbsolute, join } from "node:path";
import { pathToFileURL } from "node:url";
import type { App } from "../../shared/app/app.ts";
import { PROJECT_ROOT } from "./run-info.ts";

export const PROJECT_APP = "app/index.ts";

/** The app module the local commands run: ACKBOX_APP when set, else app/index.ts (the one the deployed Workers run). */
export function appModuleOf(env: Readonly<Record<string, string | undefined>> = process.env): string {
  return env.ACKBOX_APP?.trim() || PROJECT_APP;
}

/** The module's path: relative to the project root unless absolute. */
export function appModulePath(module: string, root: string = PROJECT_ROOT): string {
  return isAbsolute(module) ? module : join(root, module);
}

export async function loadProjectApp(root: string = PROJECT_ROOT, module: string = appModuleOf()): Promise<App> {
  const path = appModulePath(module, root);
  const loaded = (await import(pathToFileURL(path).href)) as { app?: App };
  if (!loaded.app) throw new Error(`${path} exports no \`app\` (export const app = createApp()…)`);
  return loaded.app;
}
