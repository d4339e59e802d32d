/**
 * One door for app authors: app/ (its code and its tests), the guide's code
 * blocks and the examples (examples/) import from the engine's shared/ only
 * shared/app/index.ts and its test kit, shared/app/testing.ts, and those
 * carry everything the guide uses. A new import of shared/app/app.ts or
 * shared/delivery/failure.ts from an app fails here. And the app is the
 * team's: no test, example, script under test or engine test project imports
 * or bundles app/index.ts (or the Worker entries over it) but the named
 * project-level ones, so replacing it breaks none.
 */
import { readdirSync, readFileSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import { describe, expect, it } from "vitest";
import * as door from "../../shared/app/index.ts";

const ROOT = join(import.meta.dirname, "../..");
const DOORS = ["shared/app/index.ts", "shared/app/testing.ts"];
/** This project's Worker entries: one line each over app/index.ts (worker-entries.test.ts). */
const PROJECT_ENTRIES = ["workers/ingress/index.ts", "workers/consumer/index.ts"];
/**
 * The files whose claim is about the project's own app, whatever it composes (app/index.test.ts, the app's own
 * test, is in app/): the commands that serve the team's app (setup uploads its secrets, dev-vars:example lists
 * its settings), the app module a local run defaults to, the check that the committed .dev.vars.example is the
 * one generated from it, and the checks of the entry files themselves.
 */
const PROJECT_LEVEL = [
  "cli/project/setup.ts",
  "cli/project/dev-vars-example.ts",
  "cli/local/project-app.ts",
  "test/node/dev-vars-example.test.ts",
  "test/node/worker-entries.test.ts",
  "test/node/package.test.ts",
];

function tsFiles(dir: string): string[] {
  return readdirSync(join(ROOT, dir), { withFileTypes: true }).flatMap((entry) =>
    entry.isDirectory() ? tsFiles(join(dir, entry.name)) : /\.m?ts$/.test(entry.name) ? [join(dir, entry.name)] : [],
  );
}

/** Every module a source names (static imports, re-exports, dynamic imports), resolved to a path from the root. */
function importsOf(source: string, fromDir: string): string[] {
  const specifiers = [...source.matchAll(/(?:from|import)\s*\(?\s*"([^"]+)"/g)].map((m) => m[1] as string);
  return specifiers.filter((s) => s.startsWith(".")).map((s) => relative(ROOT, resolve(ROOT, fromDir, s)));
}

const read = (file: string) => ({ name: file, source: readFileSync(join(ROOT, file), "utf8"), dir: dirname(file) });
const sources: { name: string; source: string; dir: string }[] = [
  ...tsFiles("app").map(read),
  ...tsFiles("examples").map(read),
  // The guide's blocks are written as examples/guide/my-app.ts would import.
  ...[...readFileSync(join(ROOT, "docs/building-an-app.md"), "utf8").matchAll(/```ts\n([\s\S]*?)```/g)].map((m, i) => ({
    name: `docs/building-an-app.md block ${i + 1}`,
    source: m[1] ?? "",
    dir: "examples/guide",
  })),
];

describe("the app's one door into the engine", () => {
  it("app/, the guide and the examples import nothing from shared/ but shared/app/index.ts and shared/app/testing.ts", () => {
    expect(sources.filter((s) => s.name.startsWith("examples/")).length).toBeGreaterThan(8);
    const engine = sources.flatMap(({ name, source, dir }) =>
      importsOf(source, dir)
        .filter((path) => path.startsWith("shared/"))
        .map((path) => `${name} → ${path}`),
    );
    expect(engine.length, "no app file imports the door: the scan reads nothing").toBeGreaterThan(3);
    expect(engine.filter((line) => !DOORS.some((door) => line.endsWith(` → ${door}`)))).toEqual([]);
  });

  it("the guide and the /standup example are tested on the kit alone: nothing from test/ or the Workers", () => {
    const kitOnly = sources.filter((s) => /^(examples\/(guide|standup)\/|docs\/)/.test(s.name));
    expect(kitOnly.filter((s) => s.source.includes("testing.ts")).map((s) => s.name)).toEqual(
      expect.arrayContaining(["examples/guide/my-app.test.ts", "examples/standup/app.test.ts"]),
    );
    const outside = kitOnly.flatMap(({ name, source, dir }) =>
      importsOf(source, dir)
        .filter((path) => path.startsWith("test/") || path.startsWith("workers/"))
        .map((path) => `${name} → ${path}`),
    );
    expect(outside).toEqual([]);
  });

  it("no test, example or script imports app/ or the project's Worker entries over it, but the named project-level ones", () => {
    const files = [...tsFiles("test"), ...tsFiles("examples"), ...tsFiles("scripts"), ...tsFiles("cli"), "vitest.config.ts"]
      .filter((file) => file !== "test/node/app-door.test.ts") // this file names them, to look for them
      .map(read);
    const intoApp = files.flatMap(({ name, source, dir }) => [
      ...importsOf(source, dir)
        .filter((path) => path.startsWith("app/") || PROJECT_ENTRIES.includes(path))
        .map((path) => `${name} → ${path}`),
      // An entry handed to a bundler, wrangler or a test project as a path rather than imported.
      ...[...source.matchAll(/"((?:\.\.?\/)*(?:app\/index\.ts|workers\/(?:ingress|consumer)\/index\.ts))"/g)].map(
        (m) => `${name} names ${m[1]}`,
      ),
    ]);
    expect(files.length).toBeGreaterThan(150);
    expect(intoApp.filter((line) => !PROJECT_LEVEL.some((file) => line.startsWith(`${file} `)))).toEqual([]);
    // The named ones are still what they are said to be (a stale name would excuse nothing, silently).
    for (const file of PROJECT_LEVEL)
      expect(
        intoApp.some((line) => line.startsWith(`${file} `)),
        file,
      ).toBe(true);
  });

  it("every workerd project but `app` runs the engine's test entries (the pipeline's over the shipped reference app), not the wrangler files' main over app/index.ts", () => {
    const config = readFileSync(join(ROOT, "vitest.config.ts"), "utf8");
    expect(config).toContain(
      'const TEST_ENTRIES = { ingress: "./test/support/entries/ingress.ts", consumer: "./test/support/entries/consumer.ts" } as const;',
    );
    const mains = Object.fromEntries([...config.matchAll(/workerd\("(\w+)", "[^"]+", ([\w.]+)/g)].map((m) => [m[1], m[2]]));
    expect(mains).toEqual({
      unit: "TEST_ENTRIES.consumer",
      ingress: "TEST_ENTRIES.ingress",
      consumer: "TEST_ENTRIES.consumer",
      app: "undefined",
    });
    // The pipeline project, whose cloudflareTest is its own: its SELF, and the consumer it bundles (build-consumer.ts).
    expect(config).toContain('const REFERENCE_ENTRIES = { ingress: "./test/support/entries/reference-ingress.ts" } as const;');
    expect(config.match(/cloudflareTest\(\{\s*main: REFERENCE_ENTRIES\.ingress,/g)).toHaveLength(1);
    expect(config.match(/cloudflareTest\(/g)).toHaveLength(2);
    expect(readFileSync(join(ROOT, "test/pipeline/build-consumer.ts"), "utf8")).toContain(
      'bundleWorker("test/support/entries/reference-consumer.ts"',
    );
  });

  it("carries what the guide uses: createApp, the intents, defineEffect, followUps, fatal, transient, manifestOf", () => {
    for (const name of ["createApp", "slack", "run", "respondTo", "defineEffect", "followUps", "fatal", "transient", "manifestOf"]) {
      expect(typeof (door as Record<string, unknown>)[name], name).toBe("function");
    }
  });
});
