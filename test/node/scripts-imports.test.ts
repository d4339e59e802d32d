/**
 * scripts/ and cli/ have no import circles (demo.ts and demo-distributed.ts
 * imported each other): every module's relative imports, type-only ones
 * included, followed from each file, must never lead back to it.
 */
import { readdirSync, readFileSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import { describe, expect, it } from "vitest";

const ROOT = join(import.meta.dirname, "../..");

function tsFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) =>
    entry.isDirectory() ? tsFiles(join(dir, entry.name)) : entry.name.endsWith(".ts") ? [join(dir, entry.name)] : [],
  );
}

describe("scripts/ and cli/", () => {
  it("has no import circles", () => {
    const files = [...tsFiles(join(ROOT, "scripts")), ...tsFiles(join(ROOT, "cli"))];
    const imports = new Map(
      files.map((file) => [
        file,
        [...readFileSync(file, "utf8").matchAll(/(?:from|import)\s*\(?\s*"(\.[^"]+)"/g)].map((m) => resolve(dirname(file), m[1] as string)),
      ]),
    );
    expect([...imports.values()].flat().length).toBeGreaterThan(50);
    const circles: string[] = [];
    const state = new Map<string, "open" | "done">();
    const path: string[] = [];
    const visit = (file: string) => {
      state.set(file, "open");
      path.push(file);
      for (const next of imports.get(file) ?? []) {
        if (!imports.has(next)) continue;
        if (state.get(next) === "open") circles.push([...path.slice(path.indexOf(next)), next].map((f) => relative(ROOT, f)).join(" → "));
        else if (!state.has(next)) visit(next);
      }
      path.pop();
      state.set(file, "done");
    };
    for (const file of files) if (!state.has(file)) visit(file);
    expect(circles).toEqual([]);
  });
});
