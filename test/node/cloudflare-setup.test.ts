/**
 * `npm run setup` and `npm run deploy`. Nothing here reaches Cloudflare: the
 * real scripts are run where they must refuse (no login, placeholder id), and
 * the setup/deploy logic runs against a scripted wrangler, on a copy of the
 * two wrangler files.
 */
import { execFile } from "node:child_process";
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import {
  CloudflareError,
  deploy,
  PLACEHOLDER_DATABASE_ID,
  resourcesOf,
  setup,
  type WranglerResult,
  type WranglerRunner,
} from "../../scripts/cloudflare/cloudflare.ts";
import { PROJECT_ROOT } from "../../scripts/local/run-info.ts";

const exec = promisify(execFile);
const DB_ID = "6f1c2a9e-3b4d-4c5e-8f70-123456789abc";

async function runScript(script: string, env: Record<string, string | undefined>) {
  try {
    await exec(process.execPath, [join(PROJECT_ROOT, "scripts", script)], {
      cwd: PROJECT_ROOT,
      env: env as NodeJS.ProcessEnv,
      timeout: 60_000,
    });
    return { code: 0, stderr: "" };
  } catch (error) {
    const failed = error as { code?: number; stderr?: string };
    return { code: failed.code ?? -1, stderr: failed.stderr ?? "" };
  }
}

describe("setup and deploy scripts, for real, offline", () => {
  const wranglerFiles = () => [
    readFileSync(join(PROJECT_ROOT, "wrangler.toml"), "utf8"),
    readFileSync(join(PROJECT_ROOT, "workers/consumer/wrangler.toml"), "utf8"),
  ];

  it("setup stops with a clear error when not logged in, and changes nothing", async () => {
    const before = wranglerFiles();
    const home = mkdtempSync(join(tmpdir(), "ackbox-no-login-"));
    try {
      // A HOME without wrangler's login, and no token: what a fresh machine has.
      const env = {
        ...process.env,
        HOME: home,
        XDG_CONFIG_HOME: join(home, ".config"),
        CLOUDFLARE_API_TOKEN: undefined,
        CLOUDFLARE_ACCOUNT_ID: undefined,
      };
      const { code, stderr } = await runScript("setup.ts", { ...env, SLACK_SIGNING_SECRET: "s", SLACK_BOT_TOKEN: "xoxb-t" });
      expect(code).toBe(1);
      expect(stderr).toMatch(/not logged in to Cloudflare\. Run `npx wrangler login`/);
    } finally {
      rmSync(home, { recursive: true, force: true });
    }
    expect(wranglerFiles()).toEqual(before);
  }, 60_000);

  it("setup asks for the secrets before touching the account", async () => {
    const { code, stderr } = await runScript("setup.ts", { ...process.env, SLACK_SIGNING_SECRET: undefined, SLACK_BOT_TOKEN: undefined });
    expect(code).toBe(1);
    expect(stderr).toMatch(/missing in the environment: SLACK_SIGNING_SECRET, SLACK_BOT_TOKEN/);
  }, 60_000);

  it("deploy refuses the placeholder database_id", async () => {
    expect(resourcesOf().databaseIds.ingress).toBe(PLACEHOLDER_DATABASE_ID); // the committed state: setup not run
    const { code, stderr } = await runScript("deploy.ts", process.env);
    expect(code).toBe(1);
    expect(stderr).toMatch(/placeholder database_id: run `npm run setup` first/);
  }, 60_000);
});

/** A scripted wrangler: a little account that remembers what was created. */
function fakeAccount(existing: { databases?: Array<{ name: string; uuid: string }>; queues?: string[] } = {}) {
  const databases = [...(existing.databases ?? [])];
  const queues = new Set(existing.queues ?? []);
  const calls: Array<{ args: string[]; input?: string }> = [];
  const ok = (output = ""): WranglerResult => ({ code: 0, output });
  const wrangler: WranglerRunner = async (args, options = {}) => {
    calls.push({ args: [...args], ...(options.input !== undefined ? { input: options.input } : {}) });
    const [a, b, c] = args;
    if (a === "whoami") return ok("👋 You are logged in with an API Token, associated with the email ops@example.com.");
    if (a === "d1" && b === "list") return ok(JSON.stringify(databases));
    if (a === "d1" && b === "create" && c) {
      databases.push({ name: c, uuid: DB_ID });
      return ok(`✅ Successfully created DB '${c}'`);
    }
    if (a === "queues" && b === "info" && c)
      return queues.has(c) ? ok(`Queue Name: ${c}`) : { code: 1, output: `✘ [ERROR] Queue "${c}" does not exist.` };
    if (a === "queues" && b === "create" && c) {
      queues.add(c);
      return ok(`✅ Created queue ${c}.`);
    }
    if (a === "secret" && b === "bulk") return ok("✨ Success! Uploaded secrets");
    if (a === "d1" && b === "migrations") return ok("✅ applied");
    if (a === "deploy") return ok("Deployed");
    return { code: 1, output: `unexpected wrangler ${args.join(" ")}` };
  };
  return { wrangler, calls, databases, queues };
}

describe("setup and deploy logic, against a scripted wrangler", () => {
  let root: string;
  beforeEach(() => {
    root = mkdtempSync(join(tmpdir(), "ackbox-setup-"));
    mkdirSync(join(root, "workers", "consumer"), { recursive: true });
    copyFileSync(join(PROJECT_ROOT, "wrangler.toml"), join(root, "wrangler.toml"));
    copyFileSync(join(PROJECT_ROOT, "workers/consumer/wrangler.toml"), join(root, "workers/consumer/wrangler.toml"));
  });
  afterEach(() => rmSync(root, { recursive: true, force: true }));

  const STRONG_ADMIN_TOKEN = "9f2c4e6a8b0d1f3e5a7c9b2d4f6e8a0c";
  const secrets = { SLACK_SIGNING_SECRET: "sign-secret", SLACK_BOT_TOKEN: "xoxb-bot", ADMIN_TOKEN: STRONG_ADMIN_TOKEN };

  it("creates what is missing, writes the database id into both files, and uploads secrets through stdin", async () => {
    const account = fakeAccount();
    const ingressBefore = readFileSync(join(root, "wrangler.toml"), "utf8");
    const report = await setup({ wrangler: account.wrangler, root, env: secrets });

    expect(report.steps).toEqual([
      "logged in (ops@example.com)",
      `D1 database ackbox: created (${DB_ID})`,
      "wrangler.toml: database_id written",
      "workers/consumer/wrangler.toml: database_id written",
      "queue ackbox-outbox: created",
      "queue ackbox-outbox-dlq: created",
      "ingress secrets set: SLACK_SIGNING_SECRET, SLACK_BOT_TOKEN, ADMIN_TOKEN",
      "consumer secrets set: SLACK_BOT_TOKEN",
    ]);
    expect(resourcesOf(root).databaseIds).toEqual({ ingress: DB_ID, consumer: DB_ID });
    // Only the id changed: comments and the rest of the file are as they were.
    expect(readFileSync(join(root, "wrangler.toml"), "utf8")).toBe(ingressBefore.replace(PLACEHOLDER_DATABASE_ID, DB_ID));
    const bulk = account.calls.filter((c) => c.args[0] === "secret");
    expect(bulk.map((c) => c.args)).toEqual([
      ["secret", "bulk", "-c", "wrangler.toml"],
      ["secret", "bulk", "-c", "workers/consumer/wrangler.toml"],
    ]);
    expect(JSON.parse(bulk[0]?.input ?? "")).toEqual(secrets);
    expect(account.calls.flatMap((c) => c.args).join(" ")).not.toMatch(/sign-secret|xoxb-bot/); // never in argv
  });

  it("is idempotent: a second run finds everything in place and changes nothing", async () => {
    const account = fakeAccount();
    await setup({ wrangler: account.wrangler, root, env: secrets });
    const files = [readFileSync(join(root, "wrangler.toml"), "utf8"), readFileSync(join(root, "workers/consumer/wrangler.toml"), "utf8")];
    const again = await setup({ wrangler: account.wrangler, root, skipSecrets: true, env: {} });
    expect(again.steps).toEqual([
      "logged in (ops@example.com)",
      `D1 database ackbox: exists (${DB_ID})`,
      "wrangler.toml: database_id already set",
      "workers/consumer/wrangler.toml: database_id already set",
      "queue ackbox-outbox: exists",
      "queue ackbox-outbox-dlq: exists",
      "secrets skipped (--skip-secrets)",
    ]);
    expect([readFileSync(join(root, "wrangler.toml"), "utf8"), readFileSync(join(root, "workers/consumer/wrangler.toml"), "utf8")]).toEqual(
      files,
    );
    expect(account.databases).toHaveLength(1);
  });

  it("explains a missing login or network instead of dumping wrangler's output", async () => {
    const offline: WranglerRunner = async () => ({
      code: 1,
      output: "✘ [ERROR] Unable to resolve Cloudflare's API hostname (api.cloudflare.com or dash.cloudflare.com).",
    });
    await expect(setup({ wrangler: offline, root, env: secrets })).rejects.toThrow(/cannot reach the Cloudflare API/);
    const loggedOut: WranglerRunner = async () => ({ code: 0, output: "You are not authenticated. Please run `wrangler login`." });
    await expect(setup({ wrangler: loggedOut, root, env: secrets })).rejects.toThrow(CloudflareError);
    expect(resourcesOf(root).databaseIds.ingress).toBe(PLACEHOLDER_DATABASE_ID);
  });

  it("refuses a weak ADMIN_TOKEN before touching the account, and says how to make one", async () => {
    const account = fakeAccount();
    await expect(setup({ wrangler: account.wrangler, root, env: { ...secrets, ADMIN_TOKEN: "admin" } })).rejects.toThrow(
      /ADMIN_TOKEN is too short .*openssl rand -hex 32/,
    );
    expect(account.calls).toEqual([]);
  });

  it("generates an ADMIN_TOKEN when none is given: kept owner-only in .admin-token, never printed, the same one on a second run", async () => {
    const account = fakeAccount();
    const { ADMIN_TOKEN: _, ...withoutToken } = secrets;
    const printed: string[] = [];
    await setup({ wrangler: account.wrangler, root, env: withoutToken, print: (line) => printed.push(line) });
    const file = join(root, ".admin-token");
    const token = readFileSync(file, "utf8").trim();
    expect(token).toMatch(/^[0-9a-f]{64}$/);
    expect(statSync(file).mode & 0o777).toBe(0o600);
    const uploads = account.calls.filter((c) => c.args[0] === "secret").map((c) => JSON.parse(c.input ?? "{}"));
    expect(uploads[0]?.ADMIN_TOKEN).toBe(token);
    expect(printed.join("\n")).not.toContain(token);
    expect(printed.join("\n")).toContain('export ACKBOX_ADMIN_TOKEN="$(cat .admin-token)"');

    account.calls.length = 0;
    await setup({ wrangler: account.wrangler, root, env: withoutToken });
    const again = account.calls.filter((c) => c.args[0] === "secret").map((c) => JSON.parse(c.input ?? "{}"));
    expect(again[0]?.ADMIN_TOKEN).toBe(token);
  });

  it("deploys in order: remote migrations, the consumer, then the ingress", async () => {
    const account = fakeAccount();
    await expect(deploy({ wrangler: account.wrangler, root })).rejects.toThrow(/run `npm run setup` first/);
    await setup({ wrangler: account.wrangler, root, skipSecrets: true, env: {} });
    account.calls.length = 0;
    await deploy({ wrangler: account.wrangler, root });
    expect(account.calls.map((c) => c.args.join(" "))).toEqual([
      "whoami",
      "d1 migrations apply ackbox --remote -c wrangler.toml",
      "deploy -c workers/consumer/wrangler.toml",
      "deploy -c wrangler.toml",
    ]);
  });
});
