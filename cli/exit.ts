/**
 * Exit codes of `npx ackbox`, for scripts (documented in docs/operating.md
 * and in `npx ackbox --help`).
 */
export const EXIT = {
  /** Done. */
  ok: 0,
  /** The server answered something unexpected (5xx, not JSON), or the CLI failed. */
  failed: 1,
  /** Bad command line, or the server refused the request as malformed (400). */
  usage: 2,
  /** Could not reach --url: connection refused, unknown host, timeout. */
  unreachable: 3,
  /** No token (ACKBOX_ADMIN_TOKEN unset) or a wrong one (401). */
  unauthorized: 4,
  /** No operator API at --url: ADMIN_TOKEN unset there (the API is off), or not an ackbox ingress (404). */
  apiOff: 5,
  /** The thing asked for does not exist (events show: no such event). */
  notFound: 6,
  /** `backlog --check`: a health threshold is breached. */
  unhealthy: 7,
} as const;

export type ExitCode = (typeof EXIT)[keyof typeof EXIT];

/** An expected failure: a message for a person and the exit code for a script. */
export class CliError extends Error {
  readonly code: ExitCode;
  constructor(message: string, code: ExitCode) {
    super(message);
    this.name = "CliError";
    this.code = code;
  }
}

export const EXIT_CODES_HELP = `Exit codes:
  0  done
  1  unexpected answer from the server (5xx, not JSON) or a CLI failure
  2  bad command line, or the server refused the request (400)
  3  cannot reach --url (connection refused, unknown host, timeout)
  4  no token (ACKBOX_ADMIN_TOKEN unset) or a wrong token (401)
  5  no operator API at --url: ADMIN_TOKEN unset there, or not an ackbox ingress (404)
  6  not found (events show: no such event)
  7  backlog --check: a health threshold is breached`;
