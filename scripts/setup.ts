/**
 * `npm run setup`: one-time creation of what the two Workers need on
 * Cloudflare (scripts/cloudflare/cloudflare.ts). Safe to run again.
 */
import { parseArgs } from "node:util";
import { ADMIN_TOKEN_FILE, CloudflareError, realWrangler, SECRETS, setup } from "./cloudflare/cloudflare.ts";

const HELP = `npm run setup [-- --skip-secrets]

One time, before the first \`npm run deploy\`; running it again changes nothing
that is already in place. Needs a Cloudflare login (\`npx wrangler login\`, or
CLOUDFLARE_API_TOKEN and CLOUDFLARE_ACCOUNT_ID in the environment).

  1. creates the D1 database named in wrangler.toml, unless it exists
  2. writes its database_id into wrangler.toml and workers/consumer/wrangler.toml
     (commit that change: deploys read it)
  3. creates the outbox queue and its dead-letter queue, unless they exist
  4. uploads the secrets found in the environment (through stdin, never argv):
${SECRETS.map((s) => `       ${s.name.padEnd(30)} → ${s.workers.join(" + ")}${s.required ? " (required)" : ""}`).join("\n")}
     ADMIN_TOKEN must be at least 32 varied characters (\`openssl rand -hex 32\`);
     unset, setup generates one and keeps it in ${ADMIN_TOKEN_FILE} (owner-only,
     git-ignored; a later run uploads the same one), never printing it.

Options:
  --skip-secrets   do steps 1-3 only; set secrets later with
                   npx wrangler secret put <NAME> -c <wrangler file>
  -h, --help       this help`;

let values: { "skip-secrets": boolean; help: boolean };
try {
  ({ values } = parseArgs({
    options: { "skip-secrets": { type: "boolean", default: false }, help: { type: "boolean", short: "h", default: false } },
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

try {
  await setup({ wrangler: realWrangler(), skipSecrets: values["skip-secrets"], print: (line) => console.log(line) });
  console.log("setup done: commit the database_id in both wrangler files, then npm run deploy");
} catch (error) {
  console.error(`✗ setup: ${error instanceof CloudflareError ? error.message : String(error)}`);
  process.exit(1);
}
