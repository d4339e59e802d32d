/**
 * One door for app authors: app/ (its code and its tests), the guide's code
 * blocks and the examples import from the engine's shared/ only
 * shared/app/index.ts, and that module carries everything the guide uses.
 * A new import of shared/app/app.ts or shared/delivery/failure.ts from an app
 * fails here.
 */
import { readdirSync, readFileSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import { describe, expect, it } from "vitest";
import * as door from "../../shared/app/index.ts";

const ROOT = join(import.meta.dirname, "../..");
const DOOR = "shared/app/index.ts";

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

const sources: { name: string; source: string; dir: string }[] = [
  ...tsFiles("app").map((file) => ({ name: file, source: readFileSync(join(ROOT, file), "utf8"), dir: dirname(file) })),
  // The guide's blocks are written as app/guide/my-app.ts would import.
  ...[...readFileSync(join(ROOT, "docs/building-an-app.md"), "utf8").matchAll(/```ts\n([\s\S]*?)```/g)].map((m, i) => ({
    name: `docs/building-an-app.md block ${i + 1}`,
    source: m[1] ?? "",
    dir: "app/guide",
  })),
];

describe("the app's one door into the engine", () => {
  it("app/, the guide and the examples import nothing from shared/ but shared/app/index.ts", () => {
    expect(sources.filter((s) => s.name.startsWith("app/")).length).toBeGreaterThan(5);
    const engine = sources.flatMap(({ name, source, dir }) =>
      importsOf(source, dir)
        .filter((path) => path.startsWith("shared/"))
        .map((path) => `${name} → ${path}`),
    );
    expect(engine.length, "no app file imports the door: the scan reads nothing").toBeGreaterThan(3);
    expect(engine.filter((line) => !line.endsWith(` → ${DOOR}`))).toEqual([]);
  });

  it("carries what the guide uses: createApp, the intents, defineEffect, followUps, fatal, transient, manifestOf", () => {
    for (const name of ["createApp", "slack", "run", "respondTo", "defineEffect", "followUps", "fatal", "transient", "manifestOf"]) {
      expect(typeof (door as Record<string, unknown>)[name], name).toBe("function");
    }
  });
});
