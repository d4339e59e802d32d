/**
 * The bench's fake Slack (scripts/bench/fake-slack.ts): a wait that is met
 * must leave no timer behind, or the bench process lives on for the whole
 * timeout after its report (`--only latency` finished at 19 s, exited at 77 s).
 */
import { afterEach, describe, expect, it, vi } from "vitest";
import { startFakeSlack } from "../../scripts/bench/fake-slack.ts";

afterEach(() => {
  vi.useRealTimers();
});

describe("the bench's fake Slack", () => {
  it("clears a met wait's timeout, so the process can exit once the report is out", async () => {
    const slack = await startFakeSlack();
    const set = vi.spyOn(globalThis, "setTimeout");
    const clear = vi.spyOn(globalThis, "clearTimeout");
    try {
      const met = slack.waitForDistinct(1, 60_000);
      // The wait's own timer: the one setTimeout call waitForDistinct made.
      expect(set).toHaveBeenCalledTimes(1);
      const timer = set.mock.results[0]?.value as ReturnType<typeof setTimeout>;
      const response = await fetch(`${slack.apiUrl}chat.postMessage`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ channel: "C1", thread_ts: "1.000001", text: "hi" }),
      });
      expect(response.status).toBe(200);
      expect(await met).toBe(true);
      expect(clear).toHaveBeenCalledWith(timer);
    } finally {
      set.mockRestore();
      clear.mockRestore();
      await slack.close();
    }
  });

  it("still answers false when the keys never arrive by the deadline", async () => {
    const slack = await startFakeSlack();
    try {
      vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout"] });
      const missed = slack.waitForDistinct(1, 1_000);
      vi.advanceTimersByTime(1_000);
      expect(await missed).toBe(false);
      expect(vi.getTimerCount()).toBe(0);
    } finally {
      vi.useRealTimers();
      await slack.close();
    }
  });
});
