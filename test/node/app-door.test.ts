/**
 * One door for app authors: app/ (its code and its tests), the guide's code
 * blocks and the examples (examples/) import from the engine's shared/ only
 * shared/app/index.ts and its test kit, shared/app/testing.ts, and those
 * carry everything the guide uses. A new import of shared/app/app.ts or
 * shared/delivery/failure.ts from an app fails here. And the app is the
 * team's: no test and no example imports app/, so replacing it breaks none.
 */
import { readdirSync, readFileSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import { describe, expect, it } from "vitest";
import * as door from "../../shared/app/index.ts";

const ROOT = join(import.meta.dirname, "../..");
const DOORS = ["shared/app/index.ts", "shared/app/testing.ts"];

function tsFiles(dir: string): string[] {
  return readdirSync(join(ROOT, dir), { withFileTypes: true }).flatMap((entry) =>
    entry.isDirectory() ? tsFiles(join(dir, entry.name)) : entry.name.endsWith(".ts") ? [join(dir, entry.name)] : [],
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

  it("no test and no example imports app/: a team that replaces it breaks none of their imports", () => {
    const files = [...tsFiles("test"), ...tsFiles("examples")].map(read);
    const intoApp = files.flatMap(({ name, source, dir }) =>
      importsOf(source, dir)
        .filter((path) => path.startsWith("app/"))
        .map((path) => `${name} → ${path}`),
    );
    expect(files.length).toBeGreaterThan(100);
    expect(intoApp).toEqual([]);
  });

  it("carries what the guide uses: createApp, the intents, defineEffect, followUps, fatal, transient, manifestOf", () => {
    for (const name of ["createApp", "slack", "run", "respondTo", "defineEffect", "followUps", "fatal", "transient", "manifestOf"]) {
      expect(typeof (door as Record<string, unknown>)[name], name).toBe("function");
    }
  });
});
