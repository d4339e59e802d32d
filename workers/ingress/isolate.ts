/**
 * This isolate's state, one of each shared by every request and shard: the
 * first attempt's bounds (shared/delivery/inline-gate.ts; index.ts counts each
 * request in progress, http.ts hands the gate to the first attempt), and the
 * meter of what it has written of each team's activity this minute
 * (shared/ops/activity.ts).
 */
import { INLINE_MAX_IN_FLIGHT, INLINE_MAX_REQUESTS, INLINE_MAX_WAIT_MS } from "../../shared/delivery/first-attempt.ts";
import { InlineGate } from "../../shared/delivery/inline-gate.ts";
import { ActivityMeter } from "../../shared/ops/activity.ts";

export const inlineGate = new InlineGate(INLINE_MAX_IN_FLIGHT, INLINE_MAX_REQUESTS, INLINE_MAX_WAIT_MS);
export const activityMeter = new ActivityMeter();
