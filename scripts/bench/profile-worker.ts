/**
 * A V8 CPU profile of one Worker running under `wrangler dev` (npm start, or
 * the bench's pipeline section), over workerd's own inspector:
 * `node scripts/bench/profile-worker.ts <port> <worker> <seconds> <out.cpuprofile>`.
 * wrangler starts the Workers' workerd with `--inspector-addr=127.0.0.1:0`:
 * its port is the one of that process's listening sockets (`ss -ltnp`) whose
 * `/json` lists `core:user:<worker>` (wrangler's own proxy on 9229 serves only
 * one Worker, and wants an Origin header). Prints self time by function and
 * by file, and inclusive time by function, the top first.
 */
import { readFileSync, writeFileSync } from "node:fs";

interface ProfileNode {
  readonly id: number;
  readonly callFrame: { readonly functionName: string; readonly url: string; readonly lineNumber: number };
  readonly children?: readonly number[];
}
interface Profile {
  readonly nodes: readonly ProfileNode[];
  readonly samples: readonly number[];
  readonly timeDeltas: readonly number[];
  readonly startTime: number;
  readonly endTime: number;
}

const args = process.argv.slice(2);
const profile = args[0]?.endsWith(".cpuprofile") ? (JSON.parse(readFileSync(args[0], "utf8")) as Profile) : await record(args);

/** `<port> <worker> <seconds> <out>`: profiles the Worker for that long and writes the profile to `out`. */
async function record([port, worker, seconds, out]: string[]): Promise<Profile> {
  if (!port || !worker || !seconds || !out) {
    console.error(
      "usage: node scripts/bench/profile-worker.ts <inspector port> <worker name> <seconds> <out.cpuprofile> | <in.cpuprofile>",
    );
    process.exit(2);
  }
  const targets = (await (await fetch(`http://127.0.0.1:${port}/json`)).json()) as { id: string; webSocketDebuggerUrl: string }[];
  const target = targets.find((t) => t.id === `core:user:${worker}` || t.id === worker);
  if (!target) throw new Error(`no core:user:${worker} among ${targets.map((t) => t.id).join(", ")}`);
  console.error(`profiling ${target.id} at ${target.webSocketDebuggerUrl} for ${seconds} s`);
  const ws = new WebSocket(target.webSocketDebuggerUrl);
  await new Promise((resolve, reject) => {
    ws.onopen = resolve;
    ws.onerror = reject;
  });
  let nextId = 1;
  const pending = new Map<number, (result: unknown) => void>();
  ws.onmessage = (message) => {
    const data = JSON.parse(String(message.data)) as { id?: number; result?: unknown };
    if (data.id !== undefined) pending.get(data.id)?.(data.result);
  };
  const send = (method: string, params: Record<string, unknown> = {}) =>
    new Promise<unknown>((resolve) => {
      const id = nextId++;
      pending.set(id, resolve);
      ws.send(JSON.stringify({ id, method, params }));
    });

  await send("Profiler.enable");
  await send("Profiler.setSamplingInterval", { interval: 1000 });
  await send("Profiler.start");
  await new Promise((resolve) => setTimeout(resolve, Number(seconds) * 1000));
  const { profile } = (await send("Profiler.stop")) as { profile: Profile };
  ws.close();
  writeFileSync(out, JSON.stringify(profile));
  return profile;
}

const byId = new Map(profile.nodes.map((n) => [n.id, n]));
const self = new Map<number, number>();
for (const [i, id] of profile.samples.entries()) self.set(id, (self.get(id) ?? 0) + (profile.timeDeltas[i] ?? 0));
const total = [...self.values()].reduce((a, b) => a + b, 0);
const tally = (key: (n: ProfileNode) => string) => {
  const sums = new Map<string, number>();
  for (const [id, us] of self) {
    const node = byId.get(id);
    if (node) sums.set(key(node), (sums.get(key(node)) ?? 0) + us);
  }
  return [...sums].sort((a, b) => b[1] - a[1]);
};
const pct = (us: number) => `${((100 * us) / total).toFixed(1).padStart(5)} %  ${(us / 1000).toFixed(0).padStart(6)} ms`;
console.log(`total sampled ${(total / 1000).toFixed(0)} ms over ${((profile.endTime - profile.startTime) / 1e6).toFixed(1)} s`);
console.log("\nself time by function:");
for (const [k, us] of tally(
  (n) => `${n.callFrame.functionName || "(anonymous)"} ${n.callFrame.url.split("/").slice(-2).join("/")}:${n.callFrame.lineNumber + 1}`,
).slice(0, 40)) {
  console.log(`${pct(us)}  ${k}`);
}
console.log("\nself time by file:");
for (const [k, us] of tally((n) => n.callFrame.url || `(${n.callFrame.functionName})`).slice(0, 20)) console.log(`${pct(us)}  ${k}`);

// Inclusive time: each sample counted once for every distinct function on its stack.
const parent = new Map<number, number>();
for (const n of profile.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
const keyOf = (n: ProfileNode) =>
  `${n.callFrame.functionName || "(anonymous)"} ${n.callFrame.url.split("/").slice(-2).join("/")}:${n.callFrame.lineNumber + 1}`;
const inclusive = new Map<string, number>();
for (const [i, id] of profile.samples.entries()) {
  const seen = new Set<string>();
  for (let at: number | undefined = id; at !== undefined; at = parent.get(at)) {
    const node = byId.get(at);
    if (node) seen.add(keyOf(node));
  }
  for (const k of seen) inclusive.set(k, (inclusive.get(k) ?? 0) + (profile.timeDeltas[i] ?? 0));
}
console.log("\ninclusive time by function:");
for (const [k, us] of [...inclusive].sort((a, b) => b[1] - a[1]).slice(0, 60)) console.log(`${pct(us)}  ${k}`);
