/**
 * A Worker entry module exports its handler and nothing else: workerd takes every export of the entry for a
 * handler (or an entrypoint class) and refuses to start on anything else — "Incorrect type for map entry …".
 * The workerd test pool imports the modules its own way and does not see it; `npm start` and the deployed
 * Worker do. Helpers and constants live in their own modules.
 */
import { readFileSync } from "node:fs";
import { resolve } from "node:path";
import { describe, expect, it } from "vitest";

const ROOT = resolve(import.meta.dirname, "../..");

describe("the Workers' entry modules", () => {
  for (const entry of [
    "workers/ingress/index.ts",
    "workers/consumer/index.ts",
    "template/workers/ingress/index.ts",
    "template/workers/consumer/index.ts",
  ]) {
    it(`${entry} exports only its default handler`, () => {
      const source = readFileSync(resolve(ROOT, entry), "utf8");
      const exports = source.split("\n").filter((line) => /^export\b/.test(line));
      // `export default { … }` or, over the engine's factory, `export default ingress(app);`.
      expect(exports.map((line) => line.replace(/^(export default)\b.*$/, "$1").trim())).toEqual(["export default"]);
    });
  }
});
