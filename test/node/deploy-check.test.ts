/**
 * The deploy path as far as CI can take it without Cloudflare: both Workers
 * built by `wrangler deploy --dry-run` (over the reference app as shipped, whose
 * mention, command and button the check drives), the built bundles started together in
 * workerd and driven end to end — and a bundle workerd refuses to start (a
 * non-function named export in the entry, TOOLCHAIN.md) is caught.
 */
import { appendFileSync, copyFileSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Bundles, buildBundles, startBundles } from "../../cli/deploy/check.ts";
import { PROJECT_ROOT } from "../../cli/local/pipeline.ts";
import { processesMentioning } from "../../cli/local/processes.ts";
import { REFERENCE_APP } from "./support/apps.ts";

describe("deploy check", () => {
  const work = mkdtempSync(join(tmpdir(), "ackbox-deploy-check-"));
  let bundles: Bundles;

  beforeAll(async () => {
    bundles = await buildBundles(join(work, "dist"), PROJECT_ROOT, REFERENCE_APP); // the requests it drives are the reference app's
  }, 120_000);
  afterAll(() => {
    rmSync(work, { recursive: true, force: true });
  });

  it("builds both Workers with wrangler deploy --dry-run", () => {
    for (const role of ["ingress", "consumer"] as const) {
      expect(bundles[role].path).toBe(join(work, "dist", role, "index.js"));
      expect(bundles[role].bytes).toBeGreaterThan(10_000);
    }
  });

  it("starts the built bundles together with two shards and drives a request of each surface, and a team of each shard, through them", async () => {
    const check = await startBundles(
      { ingress: bundles.ingress.path, consumer: bundles.consumer.path },
      { workDir: join(work, "good"), shardCount: 2, app: REFERENCE_APP },
    );
    expect(check.steps).toEqual([
      expect.stringMatching(/^started both bundles in \d+ ms$/),
      "ingress bundle acked a mention, a slash command and a button click, and a mention from a team of each of 2 shards (200)",
      "consumer bundle delivered chat.postMessage, response_url and chat.update, and each shard's reply to the stand-in",
      "consumer bundle ran its cron (scheduled) cleanly",
    ]);
    expect(processesMentioning(join(work, "good"))).toEqual([]);
  }, 90_000);

  it("fails on a bundle that workerd refuses to start", async () => {
    const broken = join(work, "consumer-with-a-constant-export.js");
    copyFileSync(bundles.consumer.path, broken);
    appendFileSync(broken, '\nexport const ACKBOX_CHECK_CONSTANT = "a non-function named export";\n');
    await expect(
      startBundles({ ingress: bundles.ingress.path, consumer: broken }, { workDir: join(work, "bad"), app: REFERENCE_APP }),
    ).rejects.toThrow(/did not start[\s\S]*Incorrect type for map entry 'ACKBOX_CHECK_CONSTANT'/);
    expect(processesMentioning(join(work, "bad"))).toEqual([]);
  }, 90_000);
});
