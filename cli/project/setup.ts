/**
 * `npm run setup`: one-time creation of what the two Workers need on
 * Cloudflare (cli/deploy/cloudflare.ts). Safe to run again.
 */
import { parseArgs } from "node:util";
import { app } from "../../app/index.ts";
import { MAX_SHARDS } from "../../shared/settings.ts";
import { ADMIN_TOKEN_FILE, CloudflareError, realWrangler, secretsOf, setup } from "../deploy/cloudflare.ts";

const appVars = Object.entries(app.declaredSettings).filter(([, spec]) => spec.kind !== "secret");

const HELP = `npm run setup [-- [--shards N] [--skip-secrets]]

One time, before the first \`npm run deploy\`; running it again changes nothing
that is already in place. Needs a Cloudflare login (\`npx wrangler login\`, or
CLOUDFLARE_API_TOKEN and CLOUDFLARE_ACCOUNT_ID in the environment).

  1. with --shards N, sets SHARD_COUNT = "N" in both wrangler files' [vars]. Raising it
     moves no workspace: each lives on the shard it was placed on at its first sight,
     and new ones start landing on the new shard once you deploy (docs/scaling.md,
     "Adding a shard"). On a deployment upgraded from an older ackbox it waits until
     the cron has placed every workspace that version left (a minute or so after
     the deploy; it says so and changes nothing until then)
  2. creates a D1 database per shard of SHARD_COUNT, unless it exists: shard 0 is
     the database named in wrangler.toml (binding DB), shard i is <that name>-shard-<i>
     (binding DB_<i>; docs/scaling.md)
  3. writes each database_id, and each DB_<i> binding, into wrangler.toml and
     workers/consumer/wrangler.toml (commit that change: deploys read it)
  4. creates the outbox queue and its dead-letter queue, unless they exist
  5. applies the D1 migrations to every shard (remote)
  6. uploads the secrets found in the environment (through stdin, never argv; a blank
     one is not found, nor does it clear one uploaded before: wrangler secret delete does):
${secretsOf(app.declaredSettings)
  .map((s) => `       ${s.name.padEnd(30)} → ${s.workers.join(" + ")}${s.required ? " (required)" : ""}`)
  .join("\n")}
     ADMIN_TOKEN must be at least 32 varied characters (\`openssl rand -hex 32\`);
     unset, setup generates one and keeps it in ${ADMIN_TOKEN_FILE} (owner-only,
     git-ignored; a later run uploads the same one), never printing it.
     The app's own secrets (app.settings in app/index.ts) go to both Workers, each
     checked first as the Workers check it.
${
  appVars.length === 0
    ? ""
    : `\nThe app's own settings that are not secrets are [vars] of both wrangler files (setup
refuses to start while a required one is empty in either, or a value given is
one the Workers would refuse):
${appVars.map(([name, spec]) => `  ${name.padEnd(30)} ${spec.kind}${spec.required ? ", required" : ""}`).join("\n")}`
}

Options:
  --shards N       split the workspaces over N D1 databases (1-${MAX_SHARDS}; default: the
                   files' SHARD_COUNT). Fewer than the files bind is refused (the
                   dropped shards' rows would be stranded).
  --skip-secrets   do steps 1-5 only; set secrets later with
                   npx wrangler secret put <NAME> -c <wrangler file>
  -h, --help       this help`;

let values: { "skip-secrets": boolean; shards?: string; help: boolean };
try {
  ({ values } = parseArgs({
    options: {
      "skip-secrets": { type: "boolean", default: false },
      shards: { type: "string" },
      help: { type: "boolean", short: "h", default: false },
    },
    strict: true,
  }));
} catch (error) {
  console.error(`setup: ${(error as Error).message}\n\n${HELP}`);
  process.exit(2);
}
if (values.help) {
  console.log(HELP);
  process.exit(0);
}

const shards = values.shards === undefined ? undefined : Number(values.shards);
if (shards !== undefined && (!/^\d+$/.test(values.shards ?? "") || shards < 1 || shards > MAX_SHARDS)) {
  console.error(`setup: --shards wants a whole number from 1 to ${MAX_SHARDS}, got ${JSON.stringify(values.shards)}\n\n${HELP}`);
  process.exit(2);
}

try {
  await setup({
    wrangler: realWrangler(),
    skipSecrets: values["skip-secrets"],
    appSettings: app.declaredSettings,
    ...(shards !== undefined ? { shards } : {}),
    print: (line) => console.log(line),
  });
  console.log("setup done: commit the database_ids and bindings in both wrangler files, then npm run deploy");
} catch (error) {
  console.error(`✗ setup: ${error instanceof CloudflareError ? error.message : String(error)}`);
  process.exit(1);
}
