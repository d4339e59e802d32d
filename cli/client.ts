/**
 * The operator API over HTTP, as the CLI sees it: one function per call, and
 * every failure turned into a CliError whose message says what to check and
 * whose code a script can branch on (cli/exit.ts).
 */
import { CliError, EXIT } from "./exit.ts";

export interface ClientOptions {
  readonly url: string;
  readonly token: string | undefined;
  readonly timeoutMs: number;
  /** --insecure-http: the operator says plain http:// to a host that is not this machine is fine. */
  readonly insecureHttp?: boolean;
  readonly fetch?: typeof fetch;
}

/** 127.0.0.0/8, localhost and [::1]: plain http:// there never leaves the machine. */
export function isLoopback(url: URL): boolean {
  return url.hostname === "localhost" || url.hostname === "[::1]" || /^127\.\d+\.\d+\.\d+$/.test(url.hostname);
}

export class AdminClient {
  readonly base: URL;
  readonly #token: string | undefined;
  readonly #timeoutMs: number;
  readonly #fetch: typeof fetch;

  constructor(options: ClientOptions) {
    let base: URL;
    try {
      base = new URL(options.url);
    } catch {
      throw new CliError(`--url ${JSON.stringify(options.url)} is not a URL (want e.g. http://127.0.0.1:8787)`, EXIT.usage);
    }
    if (base.protocol !== "http:" && base.protocol !== "https:") {
      throw new CliError(`--url must be http:// or https://, got ${base.protocol}`, EXIT.usage);
    }
    // The token goes in every request's header: in the clear only where nobody else is on the way, or when the operator says so.
    if (base.protocol === "http:" && !isLoopback(base) && !options.insecureHttp) {
      throw new CliError(
        `--url ${base.origin} is plain http:// to another machine: ACKBOX_ADMIN_TOKEN would cross the network in the clear. ` +
          "Use https://, or pass --insecure-http if that network is yours",
        EXIT.usage,
      );
    }
    // The operator API is always at /admin/… of the ingress: a path here would be dropped, so say so instead.
    if (base.pathname !== "/" || base.search !== "" || base.hash !== "" || base.username !== "" || base.password !== "") {
      throw new CliError(
        `--url is the ingress's origin only (the CLI adds /admin/…): use ${base.origin}, without ${JSON.stringify(
          base.username || base.password ? "user:password@" : `${base.pathname}${base.search}${base.hash}`,
        )}`,
        EXIT.usage,
      );
    }
    this.base = base;
    this.#token = options.token;
    this.#timeoutMs = options.timeoutMs;
    this.#fetch = options.fetch ?? fetch;
  }

  get<T>(path: string): Promise<T> {
    return this.#call<T>("GET", path);
  }

  post<T>(path: string, body: unknown): Promise<T> {
    return this.#call<T>("POST", path, body);
  }

  async #call<T>(method: string, path: string, body?: unknown): Promise<T> {
    if (!this.#token) {
      throw new CliError(
        "ACKBOX_ADMIN_TOKEN is not set: export it with the ingress's ADMIN_TOKEN " +
          "(against a running npm start it is found by itself: check --url, PORT and ACKBOX_LOCAL_DIR)",
        EXIT.unauthorized,
      );
    }
    const url = new URL(path, this.base);
    let response: Response;
    try {
      response = await this.#fetch(url, {
        method,
        headers: {
          authorization: `Bearer ${this.#token}`,
          accept: "application/json",
          ...(body === undefined ? {} : { "content-type": "application/json" }),
        },
        body: body === undefined ? undefined : JSON.stringify(body),
        signal: AbortSignal.timeout(this.#timeoutMs),
      });
    } catch (error) {
      throw new CliError(
        `cannot reach ${this.base.origin}: ${networkReason(error, this.#timeoutMs, this.base)}. Is it running, and is --url right?`,
        EXIT.unreachable,
      );
    }
    const text = await response.text();
    const json = parseJson(text);
    const serverError = isObject(json) && typeof json.error === "string" ? json.error : undefined;
    switch (response.status) {
      case 200:
        if (json === undefined)
          throw new CliError(`${method} ${url.pathname}: the answer is not JSON; is --url an ackbox ingress?`, EXIT.failed);
        return json as T;
      case 400:
        throw new CliError(`refused: ${serverError ?? text.trim()}`, EXIT.usage);
      case 401:
        throw new CliError(`unauthorized (401): ACKBOX_ADMIN_TOKEN does not match the ingress's ADMIN_TOKEN`, EXIT.unauthorized);
      case 404:
        if (serverError === "not_found") {
          const message = isObject(json) && typeof json.message === "string" ? json.message : "not found";
          throw new CliError(message, EXIT.notFound);
        }
        throw new CliError(
          `no operator API at ${this.base.origin} (404): ADMIN_TOKEN is unset there (the API is off: npx wrangler secret put ADMIN_TOKEN turns it on; npm start sets its own), or this is not an ackbox ingress`,
          EXIT.apiOff,
        );
      default:
        throw new CliError(`${method} ${url.pathname}: HTTP ${response.status} ${serverError ?? text.trim().slice(0, 200)}`, EXIT.failed);
    }
  }
}

function networkReason(error: unknown, timeoutMs: number, base: URL): string {
  if (error instanceof Error && (error.name === "TimeoutError" || error.name === "AbortError"))
    return `no answer within ${timeoutMs / 1000} s`;
  const cause = error instanceof Error ? (error.cause as { code?: string; message?: string } | undefined) : undefined;
  switch (cause?.code) {
    case "ECONNREFUSED":
      return "connection refused";
    case "ENOTFOUND":
    case "EAI_AGAIN":
      return "unknown host";
    case "ECONNRESET":
      return "connection reset";
  }
  // OpenSSL's "wrong version number" and kin: the port answered, but not in TLS.
  if (base.protocol === "https:" && /^ERR_SSL_|^EPROTO$/.test(cause?.code ?? "")) {
    return `it does not speak TLS on that port (https:// to a plain-HTTP server?): try http://${base.host}`;
  }
  return cause?.message ?? (error instanceof Error ? error.message : String(error));
}

function parseJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

export function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}
