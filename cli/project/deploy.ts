/**
 * `npm run deploy`: remote D1 migrations, then both Workers
 * (cli/deploy/cloudflare.ts). Run `npm run setup` once before.
 */
import { parseArgs } from "node:util";
import { CloudflareError, deploy, realWrangler } from "../deploy/cloudflare.ts";

const HELP = `npm run deploy [-- options]

Deploys ackbox to Cloudflare, in this order:
  1. wrangler d1 migrations apply <database> --remote   for every shard of SHARD_COUNT,
                                                        shard 0 first (forward-only, additive)
  2. wrangler deploy -c workers/consumer/wrangler.toml  (queue consumer, DLQ, cron)
  3. wrangler deploy -c wrangler.toml                   (the ingress: Slack's Request URL)
Stops at the first failure. Refuses to run while a shard's binding (DB, DB_1, …)
is missing from a wrangler file or carries the placeholder database_id (run
\`npm run setup\` first), or when not logged in.

To check the deploy path without Cloudflare: npm run check:deploy

Options:
  --skip-migrations   deploy the code only
  -h, --help          this help`;

let values: { "skip-migrations": boolean; help: boolean };
try {
  ({ values } = parseArgs({
    options: { "skip-migrations": { type: "boolean", default: false }, help: { type: "boolean", short: "h", default: false } },
    strict: true,
  }));
} catch (error) {
  console.error(`deploy: ${(error as Error).message}\n\n${HELP}`);
  process.exit(2);
}
if (values.help) {
  console.log(HELP);
  process.exit(0);
}

try {
  await deploy({ wrangler: realWrangler(), skipMigrations: values["skip-migrations"], print: (line) => console.log(line) });
  console.log(
    "✓ deployed: set the ingress's URL + /slack/events as the Request URL of your Slack app (Events, Interactivity, slash commands)",
  );
} catch (error) {
  console.error(`✗ deploy: ${error instanceof CloudflareError ? error.message : String(error)}`);
  process.exit(1);
}
