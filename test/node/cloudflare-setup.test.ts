/**
 * `npm run setup` and `npm run deploy`. Nothing here reaches Cloudflare: the
 * real scripts are run where they must refuse (no login, placeholder id), and
 * the setup/deploy logic runs against a scripted wrangler, on a copy of the
 * two wrangler files.
 */
import { execFile } from "node:child_process";
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { checkDeploy } from "../../cli/deploy/check.ts";
import {
  CloudflareError,
  deploy,
  PLACEHOLDER_DATABASE_ID,
  realWrangler,
  resourcesOf,
  setup,
  type WranglerResult,
  type WranglerRunner,
} from "../../cli/deploy/cloudflare.ts";
import { shardBindingProblems } from "../../cli/deploy/shards.ts";
import { localShardCount, writeDevConfigs } from "../../cli/local/config.ts";
import { PROJECT_ROOT } from "../../cli/local/run-info.ts";
import { setting } from "../../shared/app/index.ts";
import { SHARD_COUNT_PREVIOUS_REFUSED } from "../../shared/settings.ts";

const exec = promisify(execFile);
const DB_ID = "6f1c2a9e-3b4d-4c5e-8f70-123456789abc";
const shardId = (n: number) => `6f1c2a9e-3b4d-4c5e-8f70-${String(n).padStart(12, "0")}`;

async function runScript(script: string, env: Record<string, string | undefined>) {
  try {
    await exec(process.execPath, [join(PROJECT_ROOT, "cli", "project", script)], {
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
      // The engine's setup with real wrangler, over an app that declares nothing: whatever app/index.ts composes
      // (its own secrets and required [vars] are checked first, as they should be), the login is what is missing here.
      await expect(
        setup({
          wrangler: realWrangler(PROJECT_ROOT, env),
          env: { SLACK_SIGNING_SECRET: "s", SLACK_BOT_TOKEN: "xoxb-t" },
          appSettings: {},
        }),
      ).rejects.toThrow(/not logged in to Cloudflare\. Run `npx wrangler login`/);
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
function fakeAccount(
  existing: {
    databases?: Array<{ name: string; uuid: string }>;
    queues?: string[];
    /** Per database: the routing keys an older ackbox left unplaced (legacy_keys), or "no table" (not migrated yet). */
    legacyKeys?: Record<string, number | "no table">;
  } = {},
) {
  const databases = [...(existing.databases ?? [])];
  const legacyKeys = existing.legacyKeys ?? {};
  const queues = new Set(existing.queues ?? []);
  const calls: Array<{ args: string[]; input?: string }> = [];
  const ok = (output = ""): WranglerResult => ({ code: 0, output });
  const wrangler: WranglerRunner = async (args, options = {}) => {
    calls.push({ args: [...args], ...(options.input !== undefined ? { input: options.input } : {}) });
    const [a, b, c] = args;
    if (a === "whoami") return ok("👋 You are logged in with an API Token, associated with the email ops@example.com.");
    if (a === "d1" && b === "list") return ok(JSON.stringify(databases));
    if (a === "d1" && b === "create" && c) {
      // Shard 0's database gets DB_ID; each further one an id of its own, as Cloudflare gives.
      databases.push({ name: c, uuid: databases.length === 0 ? DB_ID : shardId(databases.length) });
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
    if (a === "d1" && b === "execute" && c && args.includes("SELECT COUNT(*) AS n FROM legacy_keys")) {
      const left = legacyKeys[c] ?? 0;
      if (left === "no table") return { code: 1, output: "✘ [ERROR] no such table: legacy_keys: SQLITE_ERROR" };
      return ok(JSON.stringify([{ results: [{ n: left }], success: true, meta: {} }]));
    }
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
      "wrangler.toml: DB database_id written",
      "workers/consumer/wrangler.toml: DB database_id written",
      "queue ackbox-outbox: created",
      "queue ackbox-outbox-dlq: created",
      "D1 migrations applied to ackbox",
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

  describe("the app's own settings", () => {
    const declared = {
      STANDUP_URL: setting.url({ description: "The standup service", required: true }),
      STANDUP_TOKEN: setting.secret({ description: "Its key", required: true }),
      STANDUP_EXTRA: setting.secret({ description: "Optional" }),
    };
    const withUrl = () => {
      for (const file of ["wrangler.toml", "workers/consumer/wrangler.toml"]) {
        const path = join(root, file);
        writeFileSync(path, readFileSync(path, "utf8").replace("[vars]\n", '[vars]\nSTANDUP_URL = "https://standup.test/api"\n'));
      }
    };

    it("uploads its secrets to both Workers, through stdin, with the engine's", async () => {
      withUrl();
      const account = fakeAccount();
      const report = await setup({
        wrangler: account.wrangler,
        root,
        env: { ...secrets, STANDUP_TOKEN: "standup-0123456" },
        appSettings: declared,
      });
      expect(report.steps.slice(-2)).toEqual([
        "ingress secrets set: SLACK_SIGNING_SECRET, SLACK_BOT_TOKEN, ADMIN_TOKEN, STANDUP_TOKEN",
        "consumer secrets set: SLACK_BOT_TOKEN, STANDUP_TOKEN",
      ]);
      const bulk = account.calls.filter((c) => c.args[0] === "secret");
      expect(JSON.parse(bulk[1]?.input ?? "")).toEqual({ SLACK_BOT_TOKEN: "xoxb-bot", STANDUP_TOKEN: "standup-0123456" });
      expect(account.calls.flatMap((c) => c.args).join(" ")).not.toContain("standup-0123456");
    });

    it("refuses, before touching the account, a required secret missing from the environment or a required var empty in a wrangler file", async () => {
      const account = fakeAccount();
      await expect(setup({ wrangler: account.wrangler, root, env: secrets, appSettings: declared })).rejects.toThrow(
        /missing in the environment: STANDUP_TOKEN/,
      );
      await expect(
        setup({ wrangler: account.wrangler, root, env: { ...secrets, STANDUP_TOKEN: "standup-0123456" }, appSettings: declared }),
      ).rejects.toThrow(/the app's required settings STANDUP_URL have no value in \[vars\]/);
      expect(account.calls).toEqual([]);
    });

    it("refuses, before touching the account, a value the Workers would refuse: naming the setting and where it is, never quoting a secret", async () => {
      const path = join(root, "workers/consumer/wrangler.toml");
      withUrl();
      writeFileSync(path, readFileSync(path, "utf8").replace("https://standup.test/api", "standup.test/api"));
      const account = fakeAccount();
      const run = (env: Record<string, string>, skipSecrets = false) =>
        setup({ wrangler: account.wrangler, root, env: { ...secrets, ...env }, skipSecrets, appSettings: declared });
      const refused = await run({ STANDUP_TOKEN: "standup-0123456" }).catch((error: Error) => error.message);
      expect(refused).toMatch(/STANDUP_URL must be .*\(\[vars\] of workers\/consumer\/wrangler\.toml\)/);
      expect(refused).not.toContain("([vars] of wrangler.toml)");
      writeFileSync(path, readFileSync(path, "utf8").replace('"standup.test/api"', '"https://standup.test/api"'));
      const short = await run({ STANDUP_TOKEN: "standup-0123456", STANDUP_EXTRA: "shh" }).catch((error: Error) => error.message);
      expect(short).toMatch(/STANDUP_EXTRA must be at least 8 characters \(it is a secret\), in the environment/);
      expect(short).not.toContain("shh");
      expect(account.calls).toEqual([]);
      // A blank required secret is a missing one (the Workers read it so).
      await expect(run({ STANDUP_TOKEN: "   " })).rejects.toThrow(/missing in the environment: STANDUP_TOKEN/);
      expect(account.calls).toEqual([]);
      // With --skip-secrets no secret is read, so only the [vars] are judged.
      await expect(run({ STANDUP_EXTRA: "shh" }, true)).resolves.toBeDefined();
    });

    it.each([
      ["a number", "5"],
      ["an empty array", "[]"],
    ])(
      "refuses a [vars] value that is not a string (%s in TOML) as the Workers do, saying so rather than calling it empty",
      async (_, toml) => {
        withUrl();
        for (const file of ["wrangler.toml", "workers/consumer/wrangler.toml"]) {
          const path = join(root, file);
          writeFileSync(path, readFileSync(path, "utf8").replace('STANDUP_URL = "https://standup.test/api"', `STANDUP_URL = ${toml}`));
        }
        const account = fakeAccount();
        const env = { ...secrets, STANDUP_TOKEN: "standup-0123456" };
        const refused = setup({ wrangler: account.wrangler, root, env, appSettings: declared });
        await expect(refused).rejects.toThrow(/STANDUP_URL must be a string \(\[vars\] of wrangler\.toml\)/);
        expect(account.calls).toEqual([]);
      },
    );

    it("uploads no blank optional secret (the Workers would read it as unset), and the rest as given", async () => {
      withUrl();
      const account = fakeAccount();
      const env = { ...secrets, STANDUP_TOKEN: "standup-0123456", STANDUP_EXTRA: "   ", SLACK_SIGNING_SECRET_PREVIOUS: " \n" };
      await setup({ wrangler: account.wrangler, root, env, appSettings: declared });
      const bulk = account.calls.filter((c) => c.args[0] === "secret").map((c) => Object.keys(JSON.parse(c.input ?? "{}")));
      expect(bulk).toEqual([
        ["SLACK_SIGNING_SECRET", "SLACK_BOT_TOKEN", "ADMIN_TOKEN", "STANDUP_TOKEN"],
        ["SLACK_BOT_TOKEN", "STANDUP_TOKEN"],
      ]);
    });
  });

  it("is idempotent: a second run finds everything in place and changes nothing", async () => {
    const account = fakeAccount();
    await setup({ wrangler: account.wrangler, root, env: secrets });
    const files = [readFileSync(join(root, "wrangler.toml"), "utf8"), readFileSync(join(root, "workers/consumer/wrangler.toml"), "utf8")];
    const again = await setup({ wrangler: account.wrangler, root, skipSecrets: true, env: {} });
    expect(again.steps).toEqual([
      "logged in (ops@example.com)",
      `D1 database ackbox: exists (${DB_ID})`,
      "wrangler.toml: DB already set",
      "workers/consumer/wrangler.toml: DB already set",
      "queue ackbox-outbox: exists",
      "queue ackbox-outbox-dlq: exists",
      "D1 migrations applied to ackbox",
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

  const files = () => [
    readFileSync(join(root, "wrangler.toml"), "utf8"),
    readFileSync(join(root, "workers/consumer/wrangler.toml"), "utf8"),
  ];

  it("with --shards 3: creates a database per shard, binds each in both files, and migrates every shard", async () => {
    const account = fakeAccount();
    const report = await setup({ wrangler: account.wrangler, root, env: {}, skipSecrets: true, shards: 3 });
    expect(report.steps).toEqual([
      "logged in (ops@example.com)",
      'wrangler.toml: SHARD_COUNT = "3" written',
      'workers/consumer/wrangler.toml: SHARD_COUNT = "3" written',
      `D1 database ackbox (shard 0, DB): created (${DB_ID})`,
      `D1 database ackbox-shard-1 (shard 1, DB_1): created (${shardId(1)})`,
      `D1 database ackbox-shard-2 (shard 2, DB_2): created (${shardId(2)})`,
      "wrangler.toml: DB database_id written, DB_1 binding added, DB_2 binding added",
      "workers/consumer/wrangler.toml: DB database_id written, DB_1 binding added, DB_2 binding added",
      "queue ackbox-outbox: created",
      "queue ackbox-outbox-dlq: created",
      "D1 migrations applied to ackbox (shard 0)",
      "D1 migrations applied to ackbox-shard-1 (shard 1)",
      "D1 migrations applied to ackbox-shard-2 (shard 2)",
      "secrets skipped (--skip-secrets)",
    ]);
    expect(account.databases.map((db) => db.name)).toEqual(["ackbox", "ackbox-shard-1", "ackbox-shard-2"]);
    expect(account.calls.filter((c) => c.args[1] === "migrations").map((c) => c.args.join(" "))).toEqual([
      "d1 migrations apply ackbox --remote -c wrangler.toml",
      "d1 migrations apply ackbox-shard-1 --remote -c wrangler.toml",
      "d1 migrations apply ackbox-shard-2 --remote -c wrangler.toml",
    ]);
    // wrangler itself reads the edited files: each shard bound in both, to its own database, with the migrations.
    expect(resourcesOf(root).shards).toEqual([
      { index: 0, binding: "DB", databaseName: "ackbox", ids: { ingress: DB_ID, consumer: DB_ID } },
      { index: 1, binding: "DB_1", databaseName: "ackbox-shard-1", ids: { ingress: shardId(1), consumer: shardId(1) } },
      { index: 2, binding: "DB_2", databaseName: "ackbox-shard-2", ids: { ingress: shardId(2), consumer: shardId(2) } },
    ]);
    expect(localShardCount(root, {})).toBe(3);
    expect(shardBindingProblems(root, { requireReal: true })).toEqual([]);
    const generated = writeDevConfigs({ root, dir: join(root, "gen"), vars: {}, shardCount: 3 });
    const consumer = JSON.parse(readFileSync(generated.consumer, "utf8").replace(/^\/\/.*\n/, "")) as {
      d1_databases: Array<{ binding: string; migrations_dir: string }>;
    };
    expect(consumer.d1_databases.map((db) => [db.binding, db.migrations_dir])).toEqual([
      ["DB", join(root, "migrations")],
      ["DB_1", join(root, "migrations")],
      ["DB_2", join(root, "migrations")],
    ]);
    // Comments and the rest of the file are kept: the edit only adds lines and rewrites the id and the count.
    expect(files()[0]).toContain("# Both Workers bind the same database (same database_id).");
    expect(files()[0]).toContain(
      '# Shard 2 (docs/scaling.md), written by npm run setup: the same database_id in both wrangler files.\n[[d1_databases]]\nbinding = "DB_2"',
    );
  });

  it("with shards, a second run (with or without --shards) finds everything in place and changes nothing", async () => {
    const account = fakeAccount();
    await setup({ wrangler: account.wrangler, root, env: {}, skipSecrets: true, shards: 2 });
    const before = files();
    const again = await setup({ wrangler: account.wrangler, root, env: {}, skipSecrets: true });
    expect(again.steps).toEqual([
      "logged in (ops@example.com)",
      `D1 database ackbox (shard 0, DB): exists (${DB_ID})`,
      `D1 database ackbox-shard-1 (shard 1, DB_1): exists (${shardId(1)})`,
      "wrangler.toml: DB already set, DB_1 already set",
      "workers/consumer/wrangler.toml: DB already set, DB_1 already set",
      "queue ackbox-outbox: exists",
      "queue ackbox-outbox-dlq: exists",
      "D1 migrations applied to ackbox (shard 0)",
      "D1 migrations applied to ackbox-shard-1 (shard 1)",
      "secrets skipped (--skip-secrets)",
    ]);
    const third = await setup({ wrangler: account.wrangler, root, env: {}, skipSecrets: true, shards: 2 });
    expect(third.steps).toContain('wrangler.toml: SHARD_COUNT = "2" already set');
    expect(files()).toEqual(before);
    expect(account.databases).toHaveLength(2);
  });

  it("adds a shard to a deployed database: only the new database is created and SHARD_COUNT raised, nothing else (no workspace moves)", async () => {
    const account = fakeAccount();
    await setup({ wrangler: account.wrangler, root, env: {}, skipSecrets: true, shards: 2 });
    account.calls.length = 0;
    const grown = await setup({ wrangler: account.wrangler, root, env: {}, skipSecrets: true, shards: 3 });
    const noMove = " (no workspace moves: new ones start landing on the new shard once this is deployed: npm run deploy)";
    expect(grown.steps.filter((step) => step.startsWith("D1 database") || step.includes("DB_") || step.includes("SHARD_COUNT"))).toEqual([
      `wrangler.toml: SHARD_COUNT = "3" written${noMove}`,
      `workers/consumer/wrangler.toml: SHARD_COUNT = "3" written${noMove}`,
      `D1 database ackbox (shard 0, DB): exists (${DB_ID})`,
      `D1 database ackbox-shard-1 (shard 1, DB_1): exists (${shardId(1)})`,
      `D1 database ackbox-shard-2 (shard 2, DB_2): created (${shardId(2)})`,
      "wrangler.toml: DB already set, DB_1 already set, DB_2 binding added",
      "workers/consumer/wrangler.toml: DB already set, DB_1 already set, DB_2 binding added",
    ]);
    // Each shard of the deployment was asked whether an older ackbox left workspaces unplaced, before the raise.
    expect(account.calls.filter((c) => c.args[1] === "execute").map((c) => c.args[2])).toEqual(["ackbox", "ackbox-shard-1"]);
    for (const file of files()) {
      expect(file).toMatch(/^SHARD_COUNT = "3"$/m);
      expect(file).not.toContain("SHARD_COUNT_PREVIOUS");
    }
  });

  it("refuses to raise the count while a shard still lists workspaces an older ackbox left unplaced, or is not migrated yet: nothing changes", async () => {
    const setUp = fakeAccount();
    await setup({ wrangler: setUp.wrangler, root, env: {}, skipSecrets: true, shards: 2 });
    const before = files();
    const databases = setUp.databases;
    const waiting = fakeAccount({ databases, legacyKeys: { "ackbox-shard-1": 37 } });
    await expect(setup({ wrangler: waiting.wrangler, root, env: {}, skipSecrets: true, shards: 3 })).rejects.toThrow(
      "shard 1 (ackbox-shard-1) still has 37 workspaces an older ackbox left without a placement (legacy_keys): adding a shard now would move those not seen since the upgrade.",
    );
    const unmigrated = fakeAccount({ databases, legacyKeys: { ackbox: "no table" } });
    await expect(setup({ wrangler: unmigrated.wrangler, root, env: {}, skipSecrets: true, shards: 3 })).rejects.toThrow(
      "shard 0 (ackbox) is not on this version's schema yet (no legacy_keys: migration 0013): deploy this version first (npm run deploy)",
    );
    expect(files()).toEqual(before);
    for (const account of [waiting, unmigrated])
      expect(
        account.calls.filter((c) => !["whoami", "execute"].includes(c.args[0] === "d1" ? (c.args[1] ?? "") : (c.args[0] ?? ""))),
      ).toEqual([]);
    // A first setup (nothing deployed yet) and a setup that keeps the count ask nothing.
    const same = fakeAccount({ databases, legacyKeys: { ackbox: 5 } });
    await setup({ wrangler: same.wrangler, root, env: {}, skipSecrets: true, shards: 2 });
    expect(same.calls.filter((c) => c.args[1] === "execute")).toEqual([]);
  });

  it("refuses fewer shards than the files bind, before touching the account", async () => {
    const account = fakeAccount();
    await setup({ wrangler: account.wrangler, root, env: {}, skipSecrets: true, shards: 3 });
    const before = files();
    account.calls.length = 0;
    await expect(setup({ wrangler: account.wrangler, root, env: {}, skipSecrets: true, shards: 2 })).rejects.toThrow(
      "the wrangler files bind 3 shards; going down to 2 would strand the rows of every team on the others (docs/scaling.md)",
    );
    expect(account.calls).toEqual([]);
    expect(files()).toEqual(before);
  });

  it("deploys with shards: migrations to every shard in order, then the code", async () => {
    const account = fakeAccount();
    await setup({ wrangler: account.wrangler, root, env: {}, skipSecrets: true, shards: 2 });
    account.calls.length = 0;
    await deploy({ wrangler: account.wrangler, root });
    expect(account.calls.map((c) => c.args.join(" "))).toEqual([
      "whoami",
      "d1 migrations apply ackbox --remote -c wrangler.toml",
      "d1 migrations apply ackbox-shard-1 --remote -c wrangler.toml",
      "deploy -c workers/consumer/wrangler.toml",
      "deploy -c wrangler.toml",
    ]);
  });

  it("stops a deploy at a shard whose migrations fail: no code deployed", async () => {
    const account = fakeAccount();
    await setup({ wrangler: account.wrangler, root, env: {}, skipSecrets: true, shards: 2 });
    const calls: string[] = [];
    const failing: WranglerRunner = async (args, options) => {
      calls.push(args.join(" "));
      if (args[1] === "migrations" && args[3] === "ackbox-shard-1") return { code: 1, output: "✘ [ERROR] D1_ERROR" };
      return account.wrangler(args, options);
    };
    await expect(deploy({ wrangler: failing, root })).rejects.toThrow(
      "remote migrations of ackbox-shard-1 (shard 1) failed (exit 1); nothing was deployed",
    );
    expect(calls.some((call) => call.startsWith("deploy"))).toBe(false);
  });

  it("a shard binding missing from one wrangler file: deploy and check:deploy refuse, naming the binding and the file", async () => {
    const account = fakeAccount();
    await setup({ wrangler: account.wrangler, root, env: {}, skipSecrets: true, shards: 2 });
    // Someone edits the consumer's file by hand and drops DB_1's block.
    const consumerPath = join(root, "workers/consumer/wrangler.toml");
    const text = readFileSync(consumerPath, "utf8");
    writeFileSync(consumerPath, text.replace(/\n# Shard 1 [^\n]*\n\[\[d1_databases\]\]\nbinding = "DB_1"(\n[^\n[]+)+/, ""));
    expect(readFileSync(consumerPath, "utf8")).not.toContain("DB_1");
    const message =
      "SHARD_COUNT is 2 but workers/consumer/wrangler.toml has no [[d1_databases]] binding DB_1 (shard 1): run `npm run setup` (it creates each shard's database and writes its binding into both wrangler files)";
    expect(shardBindingProblems(root, { requireReal: false })).toEqual([message]);
    account.calls.length = 0;
    await expect(deploy({ wrangler: account.wrangler, root })).rejects.toThrow(message);
    expect(account.calls).toEqual([]); // refused before the login check, nothing deployed
    // The deploy check stops at the same message before it builds anything.
    await expect(checkDeploy({ root })).rejects.toThrow(`the wrangler files do not bind the shards:\n${message}`);
    // setup puts it back.
    await setup({ wrangler: account.wrangler, root, env: {}, skipSecrets: true });
    expect(shardBindingProblems(root, { requireReal: true })).toEqual([]);
  });

  it("catches two shards bound to one database, and a count the two files disagree on", async () => {
    const account = fakeAccount();
    await setup({ wrangler: account.wrangler, root, env: {}, skipSecrets: true, shards: 2 });
    for (const path of [join(root, "wrangler.toml"), join(root, "workers/consumer/wrangler.toml")])
      writeFileSync(path, readFileSync(path, "utf8").replace(shardId(1), DB_ID));
    expect(shardBindingProblems(root, { requireReal: true })).toEqual([
      `DB and DB_1 bind the same database (${DB_ID}): each shard needs its own`,
    ]);
    const ingressPath = join(root, "wrangler.toml");
    writeFileSync(ingressPath, readFileSync(ingressPath, "utf8").replace('SHARD_COUNT = "2"', 'SHARD_COUNT = "3"'));
    const differ = 'SHARD_COUNT is "3" in wrangler.toml but "2" in workers/consumer/wrangler.toml: both Workers must see the same shards';
    expect(shardBindingProblems(root, { requireReal: false })).toEqual([differ]);
    // The deploy check refuses it before it builds anything.
    await expect(checkDeploy({ root })).rejects.toThrow(`the wrangler files do not bind the shards:\n${differ}`);
  });

  it("SHARD_COUNT_PREVIOUS left set in a file (an older ackbox's shard add still open): setup, deploy and check:deploy refuse it, saying what to do", async () => {
    const account = fakeAccount();
    await setup({ wrangler: account.wrangler, root, env: {}, skipSecrets: true, shards: 2 });
    const ingressPath = join(root, "wrangler.toml");
    writeFileSync(
      ingressPath,
      readFileSync(ingressPath, "utf8").replace('SHARD_COUNT = "2"', 'SHARD_COUNT = "2"\nSHARD_COUNT_PREVIOUS = "1"'),
    );
    const refused = `wrangler.toml: ${SHARD_COUNT_PREVIOUS_REFUSED}`;
    expect(shardBindingProblems(root, { requireReal: false })).toEqual([refused]);
    account.calls.length = 0;
    await expect(deploy({ wrangler: account.wrangler, root })).rejects.toThrow(refused);
    await expect(setup({ wrangler: account.wrangler, root, env: {}, skipSecrets: true })).rejects.toThrow(refused);
    expect(account.calls).toEqual([]);
    await expect(checkDeploy({ root })).rejects.toThrow(`the wrangler files do not bind the shards:\n${refused}`);
    // Emptied, as the older ackbox's procedure ends: nothing to refuse.
    writeFileSync(ingressPath, readFileSync(ingressPath, "utf8").replace('SHARD_COUNT_PREVIOUS = "1"', 'SHARD_COUNT_PREVIOUS = ""'));
    expect(shardBindingProblems(root, { requireReal: false })).toEqual([]);
  });
});
