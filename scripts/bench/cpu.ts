/**
 * CPU time of processes, read from /proc (Linux): how much CPU a variant made
 * the runtime spend per request. It is the whole workerd process (the Worker,
 * the runtime's HTTP stack and local D1's SQLite), so it is an upper bound
 * on what Workers would bill as CPU time.
 */
import { execFileSync } from "node:child_process";
import { existsSync, readdirSync, readFileSync } from "node:fs";

let ticksPerSecond: number | undefined;

function clockTicks(): number {
  if (ticksPerSecond === undefined) {
    try {
      ticksPerSecond = Number(execFileSync("getconf", ["CLK_TCK"], { encoding: "utf8" }).trim()) || 100;
    } catch {
      ticksPerSecond = 100;
    }
  }
  return ticksPerSecond;
}

/** User + system CPU of one process, in ms; undefined when it is gone or /proc is not there. */
export function processCpuMs(pid: number): number | undefined {
  const path = `/proc/${pid}/stat`;
  if (!existsSync(path)) return undefined;
  try {
    const stat = readFileSync(path, "utf8");
    // Fields after the command name (which may contain spaces) start after the last ")".
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    const utime = Number(fields[11]);
    const stime = Number(fields[12]);
    return ((utime + stime) * 1000) / clockTicks();
  } catch {
    return undefined;
  }
}

/** Every descendant of `pid` (children, their children, …). */
export function descendants(pid: number): number[] {
  const found: number[] = [];
  const visit = (parent: number) => {
    for (const child of childrenOf(parent)) {
      found.push(child);
      visit(child);
    }
  };
  visit(pid);
  return found;
}

function childrenOf(pid: number): number[] {
  const dir = `/proc/${pid}/task`;
  if (!existsSync(dir)) return [];
  const children: number[] = [];
  for (const task of readdirSync(dir)) {
    try {
      const text = readFileSync(`${dir}/${task}/children`, "utf8").trim();
      if (text) children.push(...text.split(/\s+/).map(Number));
    } catch {
      // the task ended while we looked
    }
  }
  return children;
}

export function commandOf(pid: number): string {
  try {
    return readFileSync(`/proc/${pid}/comm`, "utf8").trim();
  } catch {
    return "";
  }
}

/** The workerd processes under `root` (this process by default). */
export function workerdPids(root: number = process.pid): number[] {
  return descendants(root).filter((pid) => commandOf(pid) === "workerd");
}

/** Total CPU ms of a set of processes (those still running). */
export function cpuOf(pids: readonly number[]): number {
  let total = 0;
  for (const pid of pids) total += processCpuMs(pid) ?? 0;
  return total;
}

/** This Node process's own CPU (the load generator), in ms. */
export function selfCpuMs(): number {
  const { user, system } = process.cpuUsage();
  return (user + system) / 1000;
}
