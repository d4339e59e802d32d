/**
 * The project's app, as its Workers run it: `app` exported by <project root>/app/index.ts. Loaded at run time, not
 * imported, so the engine's commands work from a package over whichever project depends on it (run-info.ts).
 */
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import type { App } from "../../shared/app/app.ts";
import { PROJECT_ROOT } from "./run-info.ts";

export const PROJECT_APP = "app/index.ts";

export async function loadProjectApp(root: string = PROJECT_ROOT): Promise<App> {
  const path = join(root, PROJECT_APP);
  const module = (await import(pathToFileURL(path).href)) as { app?: App };
  if (!module.app) throw new Error(`${path} exports no \`app\` (export const app = createApp()…)`);
  return module.app;
}
