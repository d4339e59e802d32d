import { describe, expect, it } from "vitest";
import { INLINE_MAX_IN_FLIGHT, INLINE_MAX_ROWS, inlineIndexes } from "../../shared/delivery/first-attempt.ts";
import { InlineGate } from "../../shared/delivery/inline-gate.ts";
import type { EffectRegistry } from "../../shared/effects/registry.ts";

describe("InlineGate: at most INLINE_MAX_IN_FLIGHT inline rows in flight per isolate", () => {
  it(`takes the ${INLINE_MAX_IN_FLIGHT}th row and refuses the ${INLINE_MAX_IN_FLIGHT + 1}th with in_flight; a slot given back is taken again`, () => {
    const g = new InlineGate(INLINE_MAX_IN_FLIGHT);
    for (let i = 0; i < INLINE_MAX_IN_FLIGHT; i++) expect(g.take(1)).toBe(1);
    expect(g.inFlight).toBe(INLINE_MAX_IN_FLIGHT);
    expect(g.take(1)).toBe("in_flight");
    expect(g.inFlight).toBe(INLINE_MAX_IN_FLIGHT);
    g.give(1);
    expect(g.take(1)).toBe(1);
  });

  it("gives a request what is left under the cap, not more", () => {
    const g = new InlineGate(3);
    expect(g.take(2)).toBe(2);
    expect(g.take(2)).toBe(1);
    expect(g.take(1)).toBe("in_flight");
    expect(g.inFlight).toBe(3);
  });

  it("asks for nothing, gets nothing and is never refused; gives back never below zero", () => {
    const g = new InlineGate(0);
    expect(g.take(0)).toBe(0);
    g.give(5);
    expect(g.inFlight).toBe(0);
    expect(g.take(1)).toBe("in_flight");
  });
});

describe(`inlineIndexes: at most INLINE_MAX_ROWS (${INLINE_MAX_ROWS}) rows of a request go inline`, () => {
  const registry = {
    get: (name: string) => (name.startsWith("slack.") || name === "app.inline" ? { inline: true } : { inline: false }),
  } as unknown as EffectRegistry;

  it(`takes the first ${INLINE_MAX_ROWS} inline effects in order; the ${INLINE_MAX_ROWS + 1}th is not attempted inline`, () => {
    const effects = Array.from({ length: INLINE_MAX_ROWS + 1 }, () => ({ effect: "slack.reactions.add" }));
    expect(inlineIndexes(effects, registry)).toEqual(Array.from({ length: INLINE_MAX_ROWS }, (_, i) => i));
    expect(inlineIndexes(effects.slice(0, INLINE_MAX_ROWS), registry)).toHaveLength(INLINE_MAX_ROWS);
  });

  it("skips effects that do not go inline, and counts only those that do", () => {
    const effects = [{ effect: "app.queued" }, { effect: "slack.chat.postMessage" }, { effect: "app.queued" }, { effect: "app.inline" }];
    expect(inlineIndexes(effects, registry)).toEqual([1, 3]);
  });
});
