/**
 * `npm run check:deploy`: the deploy path, as far as it goes without
 * Cloudflare (cli/deploy/check.ts). Run with `--help`.
 */
import { parseArgs } from "node:util";
import { MAX_SHARDS } from "../../shared/settings.ts";
import { checkDeploy } from "../deploy/check.ts";

const HELP = `npm run check:deploy [-- options]

Without reaching Cloudflare: checks that both wrangler files bind every D1
database SHARD_COUNT needs (DB, DB_1, …), the same one in each file; builds
both Workers exactly as \`npm run deploy\` would upload them (wrangler deploy
--dry-run --outdir), starts the two built bundles together in workerd, and
drives a mention, a slash command and a button click through them to a local
Slack stand-in. Fails if a binding is missing, if a bundle does not build, if
workerd refuses to start it, or if an effect does not arrive.

Options:
  --shards <n>      start the bundles with n local D1 databases and send a mention
                    from a team of each shard too (default: the files' SHARD_COUNT)
  --outdir <path>   keep the bundles here (default: a temporary folder, removed)
  --json            the result as JSON
  -h, --help        this help`;

let values: { outdir?: string; shards?: string; json: boolean; help: boolean };
try {
  ({ values } = parseArgs({
    options: {
      outdir: { type: "string" },
      shards: { type: "string" },
      json: { type: "boolean", default: false },
      help: { type: "boolean", short: "h", default: false },
    },
    strict: true,
  }));
} catch (error) {
  console.error(`check:deploy: ${(error as Error).message}\n\n${HELP}`);
  process.exit(2);
}
if (values.help) {
  console.log(HELP);
  process.exit(0);
}

const shardCount = values.shards === undefined ? undefined : Number(values.shards);
if (shardCount !== undefined && (!/^\d+$/.test(values.shards ?? "") || shardCount < 1 || shardCount > MAX_SHARDS)) {
  console.error(`check:deploy: --shards wants a whole number from 1 to ${MAX_SHARDS}, got ${JSON.stringify(values.shards)}\n\n${HELP}`);
  process.exit(2);
}

const started = performance.now();
try {
  const result = await checkDeploy({
    ...(values.outdir !== undefined ? { outdir: values.outdir } : {}),
    ...(shardCount !== undefined ? { shardCount } : {}),
  });
  const seconds = ((performance.now() - started) / 1000).toFixed(1);
  if (values.json) {
    console.log(JSON.stringify({ ok: true, seconds: Number(seconds), ...result }, null, 2));
  } else {
    for (const [role, bundle] of Object.entries(result.bundles)) {
      console.log(
        `✓ ${role.padEnd(8)} built by wrangler deploy --dry-run: ${(bundle.bytes / 1024).toFixed(0)} KiB in ${bundle.buildMs} ms`,
      );
    }
    for (const step of result.start.steps) console.log(`✓ ${step}`);
    console.log(`deploy check passed in ${seconds} s${values.outdir ? ` (bundles in ${result.outdir})` : ""}`);
  }
} catch (error) {
  console.error(`✗ deploy check failed: ${error instanceof Error ? error.message : String(error)}`);
  process.exit(1);
}
