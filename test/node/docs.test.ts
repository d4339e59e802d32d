/**
 * The docs must match the code: every setting in docs/settings.md's table
 * with its real default, every `npm run` script the docs name present in
 * package.json, every file the README and the pages it sends readers to link
 * present, every `npx ackbox` command in the README one that the runbook test
 * runs (docs/operating.md), the first attempt's bounds the README quotes
 * the ones the code enforces, and the ack's statement counts docs/scaling.md
 * gives the ones its batch holds.
 */
import { existsSync, readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { pathToFileURL } from "node:url";
import { describe, expect, it } from "vitest";
import { app } from "../../examples/reference/index.ts";
import { SETTINGS } from "../../shared/settings.ts";

const ROOT = join(import.meta.dirname, "../..");
const read = (path: string) => readFileSync(join(ROOT, path), "utf8");
const README = read("README.md");
const DOCS = [
  "README.md",
  "docs/how-it-works.md",
  "docs/settings.md",
  "docs/running-locally.md",
  "docs/deploying.md",
  "docs/operating.md",
  "docs/reliability.md",
  "docs/benchmarks.md",
  "docs/building-an-app.md",
  "docs/scaling.md",
  "docs/your-project.md",
];

describe("README and docs", () => {
  it("list every setting with its default (docs/settings.md)", () => {
    const page = read("docs/settings.md");
    for (const setting of SETTINGS) {
      const shown = setting.default === "" ? "(unset)" : `\`${setting.default}\``;
      expect(page, setting.name).toContain(`| \`${setting.name}\` | ${setting.secret ? "secret" : "var"} | ${shown} |`);
    }
  });

  it("list the app's own settings with their kind and default (docs/settings.md)", () => {
    const page = read("docs/settings.md");
    for (const [name, spec] of Object.entries(app.declaredSettings)) {
      const shown = spec.default === "" ? "(unset)" : `\`${spec.default}\``;
      expect(page, name).toContain(`| \`${name}\` | ${spec.kind} | ${shown} |`);
    }
    // Not in the engine's table: they are the app's.
    for (const name of Object.keys(app.declaredSettings)) expect(SETTINGS.map((s) => s.name)).not.toContain(name);
  });

  it("name only npm scripts that exist", () => {
    const scripts = Object.keys((JSON.parse(read("package.json")) as { scripts: Record<string, string> }).scripts);
    for (const doc of DOCS) {
      for (const [, name] of read(doc).matchAll(/npm run ([\w:-]+)/g)) expect(scripts, `${doc}: npm run ${name}`).toContain(name);
    }
  });

  it("link only files that exist", () => {
    for (const doc of ["README.md", "docs/how-it-works.md", "docs/settings.md", "docs/benchmarks.md"]) {
      const links = [...read(doc).matchAll(/\]\(((?!https?:)[^)#]+)\)/g)].map((m) => m[1] ?? "");
      for (const target of links) expect(existsSync(join(ROOT, dirname(doc), target)), `${doc}: ${target}`).toBe(true);
    }
  });

  it("show only ackbox commands that the runbook test runs", () => {
    const runbook = [...read("docs/operating.md").matchAll(/```sh\n([\s\S]*?)```/g)].flatMap((m) => (m[1] ?? "").split("\n"));
    // `npx ackbox new` makes a project, it operates nothing: test/node/package.test.ts and npm run check:package run it.
    const shown = [...README.matchAll(/npx ackbox (?!new\b)[^\n`#|]*/g)].map((m) => m[0].trim());
    expect(shown.length).toBeGreaterThan(3);
    for (const command of shown) {
      // <placeholders> stand for any single argument.
      const pattern = new RegExp(`^${command.replace(/[.*+?^${}()|[\]\\]/g, "\\$&").replace(/<[^>]+>/g, "\\S+")}(\\s|$)`);
      expect(
        runbook.some((line) => pattern.test(line.trim())),
        command,
      ).toBe(true);
    }
  });

  it("quote no timings in running-locally.md: they come from a generated, dated run (benchmarks.md) or the reader's own demo", () => {
    const page = read("docs/running-locally.md");
    for (const pattern of [/\d(\.\d+)? ?ms\b/, /ready in \d/, /(about|takes|in) \d+(\.\d+)?(–\d+)? ?s\b/]) {
      expect(page.match(pattern)?.[0], String(pattern)).toBeUndefined();
    }
  });

  it("count the ack's statements as the code writes them (docs/scaling.md, what a first sight costs the ack)", async () => {
    // Imported by path, as above: record.ts is the Workers' code. A D1 that counts what one batch holds.
    const { recordIntent } = (await import(pathToFileURL(join(ROOT, "shared/outbox/record.ts")).href)) as {
      recordIntent: (db: unknown, receipt: unknown, effects: readonly unknown[], now: number, sweepGraceMs: number) => Promise<unknown>;
    };
    const batches: number[] = [];
    const statement = { bind: () => statement };
    const db = {
      prepare: () => statement,
      batch: async (statements: readonly unknown[]) => {
        batches.push(statements.length);
        // The receipt's verdict (a first delivery) and the row's id, where recordIntent reads them.
        return statements.map((_, i) => ({ results: i === 1 ? [{ changes: 1 }] : i === 2 ? [{ id: 1 }] : [], meta: {} }));
      },
    };
    // A mention's ack: one intent, FIRST_ATTEMPT off (no inline claim), no cancel.
    const mention = { id: "Ev0DOCS", kind: "event", type: "app_mention", teamId: "T0DOCS" };
    await recordIntent(db, mention, [{ key: "reply", effect: "chat.postMessage", payload: {} }], Date.now(), 60_000);
    expect(batches).toHaveLength(1);
    const n = batches[0] as number;
    const page = read("docs/scaling.md");
    const text = page.replace(/\s+/g, " ");
    expect(/an unsharded ack of a mention\b.*? is one round trip of (\d+) statements/.exec(text)?.[1]).toBe(String(n));
    expect(page).toContain(`| a workspace this isolate has seen (the steady state) | 1 | ${n} |`);
    expect(page).toContain(`| a first sight whose home is shard 0 (every first sight with one shard) | 1 | ${n + 1} |`);
    expect(page).toContain(`| a first sight whose home is another shard | 2 | 2 + ${n} |`);
  });

  it("cite Slack's page for completing an execution with the installation's token, quoting what it documents (docs/building-an-app.md)", () => {
    // The engine's one call whose permission Slack leaves unsaid: the guide says where that stands, with its source.
    const text = read("docs/building-an-app.md").replace(/\s+/g, " ");
    expect(text).toContain("(https://docs.slack.dev/reference/methods/functions.completeError)");
    expect(text).toContain('"Scopes: No scopes required"');
    expect(text).toContain('`access_denied`: "This actor does not have access to this function execution"');
    expect(text).toMatch(/leaves unsaid whether a bot token .* may complete an execution/);
  });

  it("quote the first attempt's bounds the code enforces: rows per request, inline rows in flight and requests in progress per isolate", async () => {
    const text = README.replace(/\s+/g, " ");
    const perRequest = /At most (\d+) rows per request go inline/.exec(text)?.[1];
    const inFlight = /at most (\d+) inline rows are in flight per isolate/.exec(text)?.[1];
    expect(perRequest, "the README's rows-per-request bound").toBeDefined();
    const requests = /they start only while at\s+most (\d+) requests are in progress there/.exec(text)?.[1];
    expect(inFlight, "the README's in-flight bound").toBeDefined();
    expect(requests, "the README's requests-in-progress bound").toBeDefined();
    // Imported by path: the first attempt's module is type-checked with the Workers' types, not Node's.
    const firstAttempt = (await import(pathToFileURL(join(ROOT, "shared/delivery/first-attempt.ts")).href)) as {
      INLINE_MAX_IN_FLIGHT: number;
      INLINE_MAX_REQUESTS: number;
      inlineIndexes: (effects: readonly { effect: string }[], registry: unknown, now: number) => number[];
    };
    const { effectRegistry } = (await import(pathToFileURL(join(ROOT, "shared/effects/registry.ts")).href)) as {
      effectRegistry: (effects: readonly unknown[]) => unknown;
    };
    const { INLINE_MAX_IN_FLIGHT, INLINE_MAX_REQUESTS, inlineIndexes } = firstAttempt;
    // Ten Slack-method effects in one request (every Slack method may go inline): the README's count goes first inline.
    const effects = Array.from({ length: 10 }, () => ({ effect: "chat.postMessage" }));
    expect(inlineIndexes(effects, effectRegistry([]), Date.now())).toHaveLength(Number(perRequest));
    // The isolate's budget, whose behaviour test/ingress/first-attempt.test.ts holds, is the one the README names.
    expect(INLINE_MAX_IN_FLIGHT).toBe(Number(inFlight));
    expect(INLINE_MAX_REQUESTS).toBe(Number(requests));
  });
});
