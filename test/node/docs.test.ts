/**
 * The docs must match the code: every setting in the README's table with its
 * real default, every `npm run` script the docs name present in package.json,
 * every file the README links present, and every `npx ackbox` command in the
 * README one that the runbook test runs (docs/operating.md).
 */
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { SETTINGS } from "../../shared/settings.ts";

const ROOT = join(import.meta.dirname, "../..");
const read = (path: string) => readFileSync(join(ROOT, path), "utf8");
const README = read("README.md");
const DOCS = [
  "README.md",
  "docs/running-locally.md",
  "docs/deploying.md",
  "docs/operating.md",
  "docs/reliability.md",
  "docs/benchmarks.md",
  "docs/building-an-app.md",
  "docs/scaling.md",
];

describe("README and docs", () => {
  it("list every setting with its default", () => {
    for (const setting of SETTINGS) {
      const shown = setting.default === "" ? "(unset)" : `\`${setting.default}\``;
      expect(README, setting.name).toContain(`| \`${setting.name}\` | ${setting.secret ? "secret" : "var"} | ${shown} |`);
    }
  });

  it("name only npm scripts that exist", () => {
    const scripts = Object.keys((JSON.parse(read("package.json")) as { scripts: Record<string, string> }).scripts);
    for (const doc of DOCS) {
      for (const [, name] of read(doc).matchAll(/npm run ([\w:-]+)/g)) expect(scripts, `${doc}: npm run ${name}`).toContain(name);
    }
  });

  it("link only files that exist", () => {
    for (const [, target] of README.matchAll(/\]\(((?!https?:)[^)#]+)\)/g)) expect(existsSync(join(ROOT, target ?? "")), target).toBe(true);
  });

  it("show only ackbox commands that the runbook test runs", () => {
    const runbook = [...read("docs/operating.md").matchAll(/```sh\n([\s\S]*?)```/g)].flatMap((m) => (m[1] ?? "").split("\n"));
    const shown = [...README.matchAll(/npx ackbox [^\n`#|]*/g)].map((m) => m[0].trim());
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
});
