// Bench-only stand-in for shared/log.ts (ack profiling): the same module with
// consoleLog silenced, to price the one JSON log line per request.
export { describeError, recordingLog } from "../../../shared/log.ts";

export const consoleLog = () => {};
