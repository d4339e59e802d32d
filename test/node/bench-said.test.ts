/**
 * The pipeline section counts the ack's first-attempt verdicts from what
 * `npm start` prints, so the reading must follow the pretty printer's own
 * lines: each is built here by formatRecord from a Worker record, with the
 * clock npm start puts before it.
 */
import { describe, expect, it } from "vitest";
import { formatRecord } from "../../cli/local/pretty.ts";
import { verdictOfPrinted } from "../../scripts/bench/said.ts";

const accepted = (fields: Record<string, unknown>) =>
  `10:31:05 ${formatRecord({
    worker: "ackbox-ingress",
    level: "info",
    msg: "slack request",
    fields: { verdict: "accepted", status: 200, surface: "event", id: "Ev1", outbox_ids: [7], ms: 2, ...fields },
  })}`;

describe("verdictOfPrinted", () => {
  it("reads each first-attempt verdict npm start prints back to the ack's own value", () => {
    expect(verdictOfPrinted(accepted({ first_attempt: "inline" }))).toBe("inline");
    expect(verdictOfPrinted(accepted({ first_attempt: "in_flight" }))).toBe("in_flight");
    expect(verdictOfPrinted(accepted({ first_attempt: "not_claimable" }))).toBe("not_claimable");
    expect(verdictOfPrinted(accepted({ first_attempt: "off" }))).toBe("queue");
    expect(verdictOfPrinted(accepted({ first_attempt: "no_inline_effect" }))).toBe("queue");
    // A Slack retry's note after the path is not read as a reason.
    expect(verdictOfPrinted(accepted({ first_attempt: "in_flight", retry_num: 1, retry_reason: "http_timeout" }))).toBe("in_flight");
    expect(verdictOfPrinted(accepted({ retry_num: 2, retry_reason: "http_error" }))).toBe("queue");
  });

  it("counts no other line: a delivery, a duplicate, an accepted request with no rows", () => {
    const delivered = formatRecord({
      worker: "ackbox-consumer",
      level: "info",
      msg: "delivered",
      fields: { outbox_id: 7, effect: "chat.postMessage", attempt: 1, ms: 5, follow_up_ids: [8] },
    });
    expect(delivered).toContain("→ queue");
    expect(verdictOfPrinted(`10:31:05 ${delivered}`)).toBeUndefined();
    const duplicate = formatRecord({
      worker: "ackbox-ingress",
      level: "info",
      msg: "slack request",
      fields: { verdict: "duplicate", id: "Ev1" },
    });
    expect(verdictOfPrinted(`10:31:05 ${duplicate}`)).toBeUndefined();
    expect(verdictOfPrinted(accepted({ outbox_ids: [], first_attempt: "inline" }))).toBeUndefined();
  });
});
