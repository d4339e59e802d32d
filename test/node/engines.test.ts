/**
 * What the project asks of the system Node: only that it runs npm and the
 * installer of the `node` package (which brings Node 22 for everything else).
 * Asking for 22 made every `npm ci` on a Node 20 machine warn EBADENGINE
 * about the project itself.
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { PROJECT_ROOT } from "../../cli/local/run-info.ts";

const pkg = JSON.parse(readFileSync(join(PROJECT_ROOT, "package.json"), "utf8"));
const lock = JSON.parse(readFileSync(join(PROJECT_ROOT, "package-lock.json"), "utf8"));

describe("engines", () => {
  it("accepts the Node 20 these machines run npm with, and the lock file agrees", () => {
    // A plain lower bound, so npm's check is the obvious one.
    const floor = /^>=(\d+)$/.exec(pkg.engines.node)?.[1];
    expect(floor, `engines.node is ${pkg.engines.node}`).toBeDefined();
    expect(Number(floor)).toBeLessThanOrEqual(20);
    expect(lock.packages[""].engines).toEqual(pkg.engines);
  });

  it("still brings Node 22 for everything the project runs", () => {
    expect(pkg.devDependencies.node.split(".")[0]).toBe("22");
    expect(process.versions.node.split(".")[0]).toBe("22");
  });
});
