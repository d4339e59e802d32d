/**
 * `npm run manifest -- --url https://<your ingress> --out manifest.json`: the
 * Slack app manifest of the app in app/index.ts, derived from its handlers
 * (shared/app/manifest.ts). Paste it at https://api.slack.com/apps → Create
 * New App → From a manifest.
 *
 * Without --out it prints the JSON, and only the JSON, on stdout (warnings go
 * to stderr). `npm run manifest > file` is not JSON all the same: npm itself
 * prints its `> ackbox@… manifest` banner on stdout first — hence --out (or
 * `npm -s run manifest …`).
 */
import { writeFileSync } from "node:fs";
import { parseArgs } from "node:util";
import { manifestOf } from "../../shared/app/manifest.ts";
import { loadProjectApp } from "../local/project-app.ts";

const usage = "Usage: npm run manifest -- --url https://<your ingress host> [--out manifest.json] [--name <app name>] [--distributed]";
let values: {
  url?: string | undefined;
  name?: string | undefined;
  out?: string | undefined;
  distributed?: boolean | undefined;
  help?: boolean | undefined;
};
try {
  ({ values } = parseArgs({
    options: {
      url: { type: "string" },
      name: { type: "string" },
      out: { type: "string", short: "o" },
      distributed: { type: "boolean" },
      help: { type: "boolean", short: "h" },
    },
  }));
} catch (error) {
  process.stderr.write(`manifest: ${error instanceof Error ? error.message : String(error)}\n${usage}\n`);
  process.exit(2);
}
if (values.help) {
  process.stdout.write(
    `${usage}

The Slack app manifest (JSON) of app/index.ts (or the module ACKBOX_APP names,
as for npm start): its events (message.* for the
conversations its message handlers hear), commands, shortcuts, custom steps
(functions), assistant view, interactivity and options URLs, and the bot scopes
of what it declares.

  --url          the ingress's https:// address: every Request URL is <url>/slack/events
  --out FILE     write the manifest to FILE (npm prints its own banner on stdout, so
                 \`npm run manifest > FILE\` would not be JSON; or use \`npm -s run manifest\`)
  --name NAME    the app's and its bot user's name (default ackbox)
  --distributed  an app installed by OAuth (SLACK_CLIENT_ID): adds the redirect URL
                 <url>/slack/oauth_redirect and the app_uninstalled / tokens_revoked events
`,
  );
  process.exit(0);
}
if (!values.url || !/^https:\/\/[^/\s]+/.test(values.url)) {
  process.stderr.write(`manifest: --url must be the https:// address Slack will call (your ingress)\n${usage}\n`);
  process.exit(2);
}
if (values.out === "") {
  process.stderr.write(`manifest: --out wants a file name\n${usage}\n`);
  process.exit(2);
}
const { manifest, warnings, notes } = manifestOf(await loadProjectApp(), {
  url: values.url,
  ...(values.name ? { name: values.name } : {}),
  ...(values.distributed ? { distributed: true } : {}),
});
for (const warning of warnings) process.stderr.write(`manifest: warning: ${warning}\n`);
for (const note of notes) process.stderr.write(`manifest: note: ${note}\n`);
const json = `${JSON.stringify(manifest, null, 2)}\n`;
if (values.out) {
  try {
    writeFileSync(values.out, json);
  } catch (error) {
    process.stderr.write(`manifest: cannot write ${values.out}: ${error instanceof Error ? error.message : String(error)}\n`);
    process.exit(1);
  }
  process.stderr.write(`manifest: wrote ${values.out}\n`);
} else {
  process.stdout.write(json);
}
