/** What the figures were measured on: they mean little without it. */
import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { cpus, loadavg, totalmem } from "node:os";
import { join } from "node:path";
import { ROOT } from "./build.ts";

export interface Machine {
  readonly date: string;
  readonly cpus: number;
  readonly cpuModel: string;
  readonly memoryGiB: number;
  readonly loadAverage: readonly number[];
  readonly node: string;
  readonly versions: Readonly<Record<string, string>>;
  readonly commit: string;
  readonly uncommittedChanges: boolean;
}

function version(pkg: string): string {
  try {
    return (JSON.parse(readFileSync(join(ROOT, "node_modules", pkg, "package.json"), "utf8")) as { version: string }).version;
  } catch {
    return "?";
  }
}

/** Read-only git queries: the commit measured, and whether the tree had local changes. */
function git(args: string[]): string {
  try {
    return execFileSync("git", args, { cwd: ROOT, encoding: "utf8", stdio: ["ignore", "pipe", "ignore"] }).trim();
  } catch {
    return "";
  }
}

export function machine(): Machine {
  return {
    date: new Date().toISOString(),
    cpus: cpus().length,
    cpuModel: cpus()[0]?.model ?? "?",
    memoryGiB: Math.round((totalmem() / 1024 ** 3) * 10) / 10,
    loadAverage: loadavg().map((x) => Math.round(x * 100) / 100),
    node: process.version,
    versions: {
      wrangler: version("wrangler"),
      miniflare: version("miniflare"),
      workerd: version("workerd"),
      autocannon: version("autocannon"),
      "slack-edge": version("slack-edge"),
    },
    commit: git(["rev-parse", "--short", "HEAD"]) || "?",
    uncommittedChanges: git(["status", "--porcelain"]) !== "",
  };
}
