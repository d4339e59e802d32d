/**
 * docs/building-an-app.md shows only code that runs: every ```ts block is a
 * verbatim part of examples/guide/my-app.ts or examples/guide/my-app.test.ts, which the
 * app project's tests run.
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";

const ROOT = join(import.meta.dirname, "../..");
const read = (path: string) => readFileSync(join(ROOT, path), "utf8");

describe("docs/building-an-app.md", () => {
  const guide = read("docs/building-an-app.md");
  const sources = [read("examples/guide/my-app.ts"), read("examples/guide/my-app.test.ts")];
  const blocks = [...guide.matchAll(/```ts\n([\s\S]*?)```/g)].map((m) => m[1] ?? "");

  it("has a block for the imports, a handler, a Slack method, a custom effect with a follow-up, registering and testing it, a custom step, an assistant and its test", () => {
    expect(blocks).toHaveLength(9);
  });

  it.each(blocks.map((block, i) => [i + 1, block]))("block %i is verbatim in the guide's app or its test", (_, block) => {
    expect(sources.some((source) => source.includes(block))).toBe(true);
  });
});
