/**
 * `npm run manifest -- --url https://<your ingress>`: the Slack app manifest
 * of the app in app/index.ts, derived from its handlers (shared/app/manifest.ts).
 * Paste it at https://api.slack.com/apps → Create New App → From a manifest.
 */
import { parseArgs } from "node:util";
import { manifestOf } from "../shared/app/manifest.ts";
import { loadProjectApp } from "./local/project-app.ts";

const usage = "Usage: npm run manifest -- --url https://<your ingress host> [--name <app name>]";
let values: { url?: string | undefined; name?: string | undefined; help?: boolean | undefined };
try {
  ({ values } = parseArgs({ options: { url: { type: "string" }, name: { type: "string" }, help: { type: "boolean", short: "h" } } }));
} catch (error) {
  process.stderr.write(`manifest: ${error instanceof Error ? error.message : String(error)}\n${usage}\n`);
  process.exit(2);
}
if (values.help) {
  process.stdout.write(
    `${usage}\n\nPrints the Slack app manifest (JSON) of app/index.ts: its events, commands,\nshortcuts, interactivity and options URLs, and the bot scopes of the Slack methods it declares.\n`,
  );
  process.exit(0);
}
if (!values.url || !/^https:\/\/[^/\s]+/.test(values.url)) {
  process.stderr.write(`manifest: --url must be the https:// address Slack will call (your ingress)\n${usage}\n`);
  process.exit(2);
}
const { manifest, warnings } = manifestOf(await loadProjectApp(), { url: values.url, ...(values.name ? { name: values.name } : {}) });
for (const warning of warnings) process.stderr.write(`manifest: warning: ${warning}\n`);
process.stdout.write(`${JSON.stringify(manifest, null, 2)}\n`);
