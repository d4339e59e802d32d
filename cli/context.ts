import type { AdminClient } from "./client.ts";

/** What a command may use: its API client, its output streams, the environment and a clock. Tests can replace any of it. */
export interface Context {
  readonly client: AdminClient;
  readonly json: boolean;
  readonly out: (text: string) => void;
  readonly err: (text: string) => void;
  readonly env: Readonly<Record<string, string | undefined>>;
  readonly now: () => number;
  readonly sleep: (ms: number) => Promise<void>;
  readonly isTty: boolean;
  readonly timeoutMs: number;
}
