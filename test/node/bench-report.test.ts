/**
 * The bench report's arithmetic (scripts/bench/report.ts) on a fixture: the
 * ratios, which side of each target a figure falls on, and that the markdown
 * carries the figures it was given. No wrangler, no load: what a run measures
 * is the sections' job; what the report makes of it is checked here.
 */
import { describe, expect, it } from "vitest";
import type { AckResult, VariantResult } from "../../scripts/bench/ack.ts";
import { type AnswerFigures, type AssistantResult, phaseFigures, spread } from "../../scripts/bench/assistant.ts";
import type { BurstRun } from "../../scripts/bench/burst-types.ts";
import type { LatencyResult, LatencyRun } from "../../scripts/bench/latency.ts";
import { BUILT, DURABLE_FLOOR, type PipelineResult, type PipelineRun } from "../../scripts/bench/pipeline.ts";
import {
  type BenchResult,
  latencyRatios,
  pipelineOverFloor,
  renderMarkdown,
  spikeP50s,
  spikeRatios,
  TARGETS,
  verdictsOf,
} from "../../scripts/bench/report.ts";
import { SPIKE_ACKBOX, SPIKE_NAIVE, type SpikeBurst, type SpikeResult } from "../../scripts/bench/spike.ts";

const said = { firstAttempt: {}, lines: {} };

function variant(name: string, rps: number, p99Ms: number, rows = 100): VariantResult {
  return {
    name,
    meaning: name,
    requests: 100,
    rps,
    p50Ms: 1,
    p99Ms,
    rpsPerRound: [rps],
    p99PerRound: [p99Ms],
    statuses: { 200: 100 },
    errors: 0,
    runtimeCpuMsPerRequest: 1,
    clientCpuMsPerRequest: 0.1,
    durable: { outboxRows: rows, answered200: 100 },
  };
}

function ack(on: VariantResult, off: VariantResult, sustained?: { on: [number, number]; off: [number, number] }): AckResult {
  const figures = ([rps, p99Ms]: [number, number]) => ({ requests: 100, rps, p99Ms, rpsPerRound: [rps] });
  return {
    config: { requests: 100, connections: 4, rounds: 1, warmup: 0, sustained: { requests: 100, rounds: sustained ? 1 : 0 } },
    variants: [on, off],
    logLines: {},
    said: { ingress: said, "ingress-off": said },
    ...(sustained ? { sustained: { ingress: figures(sustained.on), off: figures(sustained.off), said, offSaid: said } } : {}),
  };
}

function latencyRun(variantName: string, load: string, p50: number, p99: number, delivered = 10): LatencyRun {
  return {
    variant: variantName,
    load,
    offeredPerSecond: 10,
    achievedPerSecond: 10,
    accepted: 10,
    failed: 0,
    delivered,
    ackToEffectMs: { p50, p99, max: p99 },
    slow: 0,
  };
}

function pipelineRun(name: string, ratio: number, delivered = 100): PipelineRun {
  return {
    variant: name,
    healthzPerSecond: [1000],
    eventsAckedPerSecond: [ratio * 1200],
    eventsPerSecond: [ratio * 1000],
    ratios: [ratio],
    ratio,
    ackRatios: [ratio * 1.2],
    ackRatio: ratio * 1.2,
    accepted: 100,
    delivered,
    cpuMsPerEvent: 5,
    cpuNetOfIdleMsPerEvent: 4,
    cpuMsPerEventByProcess: {},
    firstAttempt: {},
  };
}

function pipeline(built: number, floor: number, delivered = 100): PipelineResult {
  return {
    config: { requests: 100, connections: 4, rounds: 1, port: 8799, maxSeconds: 10, idleSampleMs: 500 },
    runs: [pipelineRun(BUILT, built, delivered), pipelineRun(DURABLE_FLOOR, floor)],
  };
}

function burstRun(over: Partial<BurstRun>): BurstRun {
  return {
    variant: "ackbox (PACE_AHEAD off, the default)",
    channels: 1,
    events: 300,
    delivered: 300,
    dead: 0,
    unfinished: 0,
    slackCalls: 315,
    rateLimited: 15,
    rateLimitedShare: 15 / 315,
    duplicates: 0,
    drainSeconds: 300.15,
    idealSeconds: 300,
    drainOverIdeal: 1.0005,
    deadLettered: 0,
    ...over,
  };
}

const machine = {
  date: "2026-12-01T20:00:00Z",
  cpus: 2,
  cpuModel: "test",
  memoryGiB: 4,
  loadAverage: [1, 1, 1],
  node: "22",
  versions: {},
  commit: "abc1234",
  uncommittedChanges: false,
};

/** A burst of `n` events whose ack, ack→effect and send→effect are the given figures for every event. */
function spikeBurst(n: number, ack: number, ackToEffect: number, over: Partial<SpikeBurst> = {}): SpikeBurst {
  return {
    accepted: n,
    failed: 0,
    delivered: n,
    ackMs: Array(n).fill(ack),
    ackToEffectMs: Array(n).fill(ackToEffect),
    sendToEffectMs: Array(n).fill(ack + ackToEffect),
    firstAttempt: {},
    ...over,
  };
}

/** Three bursts of each variant; ackbox's middle one is the given figures, its others faster and slower. */
function spike(ackbox: [number, number], naive: [number, number], over: Partial<SpikeBurst> = {}): SpikeResult {
  const [ack, toEffect] = ackbox;
  return {
    config: { events: 4, pairs: 3, port: 8799, maxSeconds: 10 },
    variants: [
      {
        variant: SPIKE_ACKBOX,
        meaning: "",
        bursts: [spikeBurst(4, ack / 2, toEffect / 2), spikeBurst(4, ack, toEffect, over), spikeBurst(4, ack * 3, toEffect * 3)],
      },
      { variant: SPIKE_NAIVE, meaning: "", bursts: [1, 2, 3].map(() => spikeBurst(4, naive[0], naive[1])) },
    ],
  };
}

function result(
  parts: Partial<Pick<BenchResult, "ack" | "latency" | "pipeline" | "spike" | "burst" | "assistant">>,
): Omit<BenchResult, "verdicts"> {
  return { command: "npm run bench", smoke: false, machine, loadAverageAfter: [1, 1, 1], seconds: 1, ...parts };
}

const verdict = (r: Omit<BenchResult, "verdicts">, name: string) => {
  const found = verdictsOf(r).filter((v) => v.name.includes(name));
  expect(found, `one verdict named like "${name}"`).toHaveLength(1);
  return found[0];
};

describe("the bench report's verdicts", () => {
  it("judges the first attempt's cost as ingress ÷ ingress-off, on both sides of each target", () => {
    const at = (t: number, p: number) =>
      result({
        ack: ack(variant("ingress", t * 1000, p * 10), variant("ingress-off", 1000, 10), { on: [t * 500, p * 20], off: [500, 20] }),
      });
    const met = at(TARGETS.ack.throughput, TARGETS.ack.p99);
    expect(verdict(met, "interleaved rounds — throughput")).toMatchObject({ measured: "0.85", met: true });
    expect(verdict(met, "interleaved rounds — p99")).toMatchObject({ measured: "1.5", met: true });
    expect(verdict(met, "sustained flood — throughput")).toMatchObject({ measured: "0.85", met: true });
    expect(verdict(met, "sustained flood — p99")).toMatchObject({ measured: "1.5", met: true });
    const missed = at(0.84, 1.51);
    expect(verdict(missed, "interleaved rounds — throughput")).toMatchObject({ measured: "0.84", met: false });
    expect(verdict(missed, "interleaved rounds — p99")).toMatchObject({ measured: "1.51", met: false });
    expect(verdict(missed, "sustained flood — throughput")?.met).toBe(false);
    expect(verdict(missed, "sustained flood — p99")?.met).toBe(false);
  });

  it("misses an ack whose 200s outnumber its outbox rows", () => {
    const r = result({ ack: ack(variant("ingress", 1000, 10, 99), variant("ingress-off", 1000, 10)) });
    expect(verdict(r, "ingress: every 200 has its outbox row")).toMatchObject({ met: false });
    expect(verdict(r, "ingress-off: every 200 has its outbox row")).toMatchObject({ met: true });
  });

  it("judges ack→effect as ackbox ÷ slack-edge at the steady loads, floors both at 1 ms, and reports the rushes unjudged", () => {
    expect(latencyRatios(latencyRun("ackbox", "x", 0.2, 0.9), latencyRun("slack-edge", "x", 0.1, 0.5))).toEqual({ p50: 1, p99: 1 });
    const latency: LatencyResult = {
      config: { saturate: 10, events: 10, connections: 2, lightRate: 10, rounds: 1 },
      saturatedPerSecond: { ackbox: 100, "slack-edge": 100 },
      loads: ["light (10/s)", "light (10/s), per-second rushes"],
      runs: [
        latencyRun("ackbox", "light (10/s)", 6, 15.1),
        latencyRun("slack-edge", "light (10/s)", 5, 10),
        latencyRun("ackbox", "light (10/s), per-second rushes", 500, 900, 9),
        latencyRun("slack-edge", "light (10/s), per-second rushes", 5, 10),
      ],
    };
    const r = result({ latency });
    expect(verdict(r, "p50, light (10/s): ackbox")).toMatchObject({ measured: "1.2", met: true });
    expect(verdict(r, "p99, light (10/s): ackbox")).toMatchObject({ measured: "1.51", met: false });
    expect(verdictsOf(r).filter((v) => v.name.includes("rushes: ackbox ÷"))).toEqual([]);
    // A lost effect is a miss even where no ratio is judged.
    expect(verdict(r, "rushes: ackbox's effects arrived")).toMatchObject({ measured: "0.9", met: false });
    expect(verdict(r, "light (10/s): ackbox's effects arrived")).toMatchObject({ measured: "1", met: true });
  });

  it("judges the whole pipeline as ackbox's ratio ÷ the durable floor's, on both sides of 0.8", () => {
    expect(pipelineOverFloor(pipeline(0.24, 0.3))).toBe(0.8);
    expect(verdict(result({ pipeline: pipeline(0.24, 0.3) }), "÷ the durable floor's")).toMatchObject({ measured: "0.8", met: true });
    expect(verdict(result({ pipeline: pipeline(0.23, 0.3) }), "÷ the durable floor's")).toMatchObject({ measured: "0.77", met: false });
    expect(verdict(result({ pipeline: pipeline(0.24, 0.3, 99) }), `${BUILT}: effects arrived`)).toMatchObject({ met: false });
  });

  it("judges the spike on pooled p50s: ackbox's ack→effect in ms, send→effect and ack ÷ the naive design's, on both sides", () => {
    // Pooled over every burst's events: the middle burst's figures are the p50s.
    expect(spikeP50s(spike([200, 100], [150, 150]).variants[0])).toEqual({ ack: 200, ackToEffect: 100, sendToEffect: 300 });
    expect(spikeRatios(spike([200, 100], [150, 150]))).toEqual({ ack: 1.33, ackToEffect: 0.67, sendToEffect: 1 });
    const met = result({ spike: spike([150 * TARGETS.spike.ackOverNaive, TARGETS.spike.ackToEffectP50Ms], [150, 400]) });
    expect(verdict(met, "ackbox's ack→effect p50")).toMatchObject({ measured: String(TARGETS.spike.ackToEffectP50Ms), met: true });
    expect(verdict(met, "send→effect p50, ackbox ÷ naive")?.met).toBe(true);
    expect(verdict(met, "ack p50, ackbox ÷ naive")).toMatchObject({ measured: String(TARGETS.spike.ackOverNaive), met: true });
    const missed = result({ spike: spike([150 * TARGETS.spike.ackOverNaive + 2, TARGETS.spike.ackToEffectP50Ms + 1], [150, 100]) });
    expect(verdict(missed, "ackbox's ack→effect p50")?.met).toBe(false);
    expect(verdict(missed, "send→effect p50, ackbox ÷ naive")?.met).toBe(false);
    expect(verdict(missed, "ack p50, ackbox ÷ naive")?.met).toBe(false);
    expect(verdict(met, "ackbox: every event acked and its effect arrived")?.met).toBe(true);
    // A lost effect, or an event not acked, is a miss whatever the latencies.
    const lost = result({ spike: spike([100, 50], [150, 150], { delivered: 3, ackToEffectMs: [50, 50, 50] }) });
    expect(verdict(lost, "ackbox: every event acked and its effect arrived")).toMatchObject({
      measured: "11 effects, 12 acked of 12",
      met: false,
    });
    expect(verdict(lost, "naive: every event acked and its effect arrived")?.met).toBe(true);
  });

  it("judges each burst run on dead, unfinished and drain ÷ ideal", () => {
    const burst = (over: Partial<BurstRun>) => result({ burst: { config: burstConfig, runs: [burstRun(over)] } });
    expect(verdict(burst({}), "dead")?.met).toBe(true);
    expect(verdict(burst({}), "drain ÷ ideal")).toMatchObject({ measured: "1×", met: true });
    expect(verdict(burst({ dead: 1, delivered: 299 }), "dead")?.met).toBe(false);
    expect(verdict(burst({ unfinished: 1 }), "dead")?.met).toBe(false);
    expect(verdict(burst({ drainOverIdeal: 1.21 }), "drain ÷ ideal")?.met).toBe(false);
    expect(verdict(burst({ drainOverIdeal: null, drainSeconds: null }), "drain ÷ ideal")).toMatchObject({
      measured: "not drained",
      met: false,
    });
  });
});

const burstConfig = { eventCounts: [300], channelCounts: [1], perChannelPerSecond: 1, burst: 3, callLatencyMs: 50, capSeconds: 7200 };

/** An answer as the assistant section reads it back: one model call, one stream, its first text after the model's own. */
function answer(over: Partial<AnswerFigures> = {}): AnswerFigures {
  return {
    question: 0,
    phase: "alone",
    ackMs: 12,
    firstTextMs: 1306,
    modelFirstTokenMs: 402,
    ratio: 3.25,
    modelCalls: 1,
    slackCalls: { "assistant.threads.setStatus": 1, "chat.startStream": 1, "chat.appendStream": 3, "chat.stopStream": 1 },
    complete: true,
    ...over,
  };
}

function assistant(answers: AnswerFigures[], overlaps = 0): AssistantResult {
  return {
    config: { alone: 1, questions: answers.length - 1, spreadSeconds: 10, maxStartSeconds: 120, maxSeconds: 120 },
    answers,
    phases: { alone: phaseFigures(answers, "alone"), overlapping: phaseFigures(answers, "overlapping") },
    perAnswer: { modelCalls: 1, slackCalls: { "chat.appendStream": 3, "chat.startStream": 1 } },
    complete: answers.filter((a) => a.complete).length,
    overlaps,
    seconds: 40,
  };
}

describe("the bench report's assistant section", () => {
  it("judges each answer one complete message, the model asked once, one stream, no overlap; the ratio is a figure", () => {
    const good = result({ assistant: assistant([answer(), answer({ question: 1, phase: "overlapping", firstTextMs: 2010, ratio: 5 })]) });
    expect(verdictsOf(good).map((v) => [v.section, v.met])).toEqual([
      ["assistant", true],
      ["assistant", true],
      ["assistant", true],
      ["assistant", true],
    ]);
    expect(verdict(result({ assistant: assistant([answer(), answer({ complete: false })]) }), "complete")).toMatchObject({
      measured: "1 of 2",
      met: false,
    });
    expect(verdict(result({ assistant: assistant([answer({ modelCalls: 2 })]) }), "model asked once")?.met).toBe(false);
    const twoStarts = answer({ slackCalls: { "chat.startStream": 2, "chat.stopStream": 1 } });
    expect(verdict(result({ assistant: assistant([twoStarts]) }), "startStream")?.met).toBe(false);
    expect(verdict(result({ assistant: assistant([answer()], 1) }), "overlapped")?.met).toBe(false);
    expect(verdict(result({ assistant: assistant([]) }), "complete")?.met).toBe(false); // nothing measured is not a pass
  });

  it("reports p50 and p99 of the ratio and of the absolute figures, the calls per answer and each answer", () => {
    expect(spread([3.25, 5, null])).toEqual({ p50: 3.25, p99: 5, max: 5 });
    expect(spread([1306, 2010])).toEqual({ p50: 1306, p99: 2010, max: 2010 });
    expect(spread([null])).toBeNull();
    const answers = [
      answer(),
      answer({ question: 1, phase: "overlapping", firstTextMs: 2010, ratio: 5 }),
      answer({ question: 2, phase: "overlapping", firstTextMs: 4020, ratio: 10 }),
    ];
    expect(phaseFigures(answers, "overlapping")).toMatchObject({ answers: 2, ratio: { p50: 5, p99: 10, max: 10 } });
    const r = result({ assistant: assistant(answers) });
    const markdown = renderMarkdown({ ...r, verdicts: verdictsOf(r) });
    expect(markdown).toContain("| ack → first streamed text ÷ the model's first token | alone (1) | 3.25 | 3.25 | 3.25 |");
    expect(markdown).toContain("| ack → first streamed text ÷ the model's first token | overlapping (2) | 5 | 10 | 10 |");
    expect(markdown).toContain("| ack → first streamed text, ms | overlapping (2) | 2010 | 4020 | 4020 |");
    expect(markdown).toContain("| the model's own first token, ms | alone (1) | 402 | 402 | 402 |");
    expect(markdown).toContain("Per answer (mean of 3): 1 model call(s); Slack calls chat.appendStream 3, chat.startStream 1.");
    expect(markdown.match(/^\| [012] \| (alone|overlapping) \| /gm)).toHaveLength(3);
  });
});

describe("the bench report's markdown", () => {
  it("carries every section's figures and every verdict", () => {
    const r = result({
      ack: ack(variant("ingress", 812.5, 31.4), variant("ingress-off", 901.2, 27.9)),
      pipeline: pipeline(0.16, 0.3),
      spike: spike([321.5, 45.5], [250, 120]),
      burst: { config: burstConfig, runs: [burstRun({})] },
    });
    const markdown = renderMarkdown({ ...r, verdicts: verdictsOf(r) });
    for (const figure of ["812.5", "901.2", "31.4", "0.53", "4.8 %", "1×", "abc1234", "❌ missed", "✅ met", "321.5", "45.5", "367"]) {
      expect(markdown, figure).toContain(figure);
    }
    expect(markdown.match(/^\| (ack|pipeline|spike|burst): /gm)).toHaveLength(verdictsOf(r).length);
  });
});
