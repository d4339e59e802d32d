/**
 * This isolate's first-attempt bounds (shared/delivery/inline-gate.ts): one
 * per isolate, shared by every request and shard. index.ts counts each
 * request in progress; http.ts hands the gate to the first attempt.
 */
import { INLINE_MAX_IN_FLIGHT, INLINE_MAX_REQUESTS } from "../../shared/delivery/first-attempt.ts";
import { InlineGate } from "../../shared/delivery/inline-gate.ts";

export const inlineGate = new InlineGate(INLINE_MAX_IN_FLIGHT, INLINE_MAX_REQUESTS);
