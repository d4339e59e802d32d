import type { AdminClient } from "./client.ts";

/** What a command may use: its API client, its output streams, the environment and a clock. Tests can replace any of it. */
export interface Context {
  readonly client: AdminClient;
  readonly json: boolean;
  /** Standard output; human-readable text passes through cli/printable.ts, --json is written as is. */
  readonly out: (text: string) => void;
  /** The one terminal control the CLI sends on purpose (backlog --watch on a TTY). */
  readonly clearScreen: () => void;
  readonly err: (text: string) => void;
  readonly env: Readonly<Record<string, string | undefined>>;
  readonly now: () => number;
  readonly sleep: (ms: number) => Promise<void>;
  readonly isTty: boolean;
  readonly timeoutMs: number;
}
