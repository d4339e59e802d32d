/**
 * The bad-input corpus: hostile, broken and borderline requests against the
 * ingress Worker's real fetch handler. For each: the documented status, no
 * row written (or exactly the rows a well-formed request earns), the Worker
 * still serving, and no secret in any log line.
 */
import { createExecutionContext, waitOnExecutionContext } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { afterAll, beforeEach, describe, expect, it, vi } from "vitest";
import { signatureFor } from "../../shared/slack/signature.ts";
import worker from "../support/entries/ingress.ts";
import { insertRow, resetAllShards, shardDbs, tallyAll } from "../support/rows.ts";
import { TEST_ADMIN_TOKEN, TEST_BOT_TOKEN, TEST_PREVIOUS_SECRET, TEST_SIGNING_SECRET } from "../support/settings.ts";
import {
  blockActions,
  commandForm,
  eventEnvelope,
  FORM,
  INGRESS_URL,
  interactionForm,
  JSON_TYPE,
  mention,
  uniqueId,
} from "../support/slack-requests.ts";

interface Case {
  readonly name: string;
  readonly request: () => Promise<Request>;
  readonly status: number;
  /** Rows the request may write; every refusal writes none. */
  readonly rows?: { receipts: number; outbox: number };
  readonly body?: (text: string) => void;
  /** The receipt id it must be stored under, read back byte for byte. */
  readonly storedId?: string;
  /** Settings over the test ones (the install cases run as a distributed app). */
  readonly env?: Record<string, string>;
}

/** A distributed app's settings (OAuth installs): what /slack/install and /slack/oauth_redirect need. */
const OAUTH: Record<string, string> = {
  SLACK_CLIENT_ID: "1111.2222",
  SLACK_CLIENT_SECRET: "corpus-client-secret-6b1f",
  SLACK_REDIRECT_URL: "https://ackbox.test/slack/oauth_redirect",
  TOKEN_ENCRYPTION_KEY: "5e".repeat(32),
};
const redirect = (query: string, cookie?: string) => async () =>
  new Request(new URL(`/slack/oauth_redirect?${query}`, INGRESS_URL), {
    headers: cookie ? { cookie: `ackbox_oauth_state=${cookie}` } : {},
  });

const nowSeconds = () => Math.floor(Date.now() / 1000);

/** A request with full control over every header and the body, signed over `signedBody` (default: the body). */
async function raw(options: {
  body?: string | null;
  signedBody?: string;
  contentType?: string | null;
  secret?: string;
  timestamp?: string | null;
  signature?: string | null;
  method?: string;
  path?: string;
  headers?: Record<string, string>;
}): Promise<Request> {
  const body = options.body === undefined ? JSON.stringify(eventEnvelope(mention())) : options.body;
  const timestamp = options.timestamp === undefined ? String(nowSeconds()) : options.timestamp;
  const headers = new Headers(options.headers);
  const contentType = options.contentType === undefined ? JSON_TYPE : options.contentType;
  if (contentType !== null) headers.set("content-type", contentType);
  if (timestamp !== null) headers.set("x-slack-request-timestamp", timestamp);
  const signature =
    options.signature === undefined
      ? await signatureFor(options.secret ?? TEST_SIGNING_SECRET, Number(timestamp), options.signedBody ?? body ?? "")
      : options.signature;
  if (signature !== null) headers.set("x-slack-signature", signature);
  const url = new URL(options.path ?? "/slack/events", INGRESS_URL);
  return new Request(url, { method: options.method ?? "POST", headers, body: body === null ? null : body });
}

/** A request to the operator API, with or without a bearer token. */
async function admin(
  path: string,
  options: { token?: string; authorization?: string; method?: string; body?: string } = {},
): Promise<Request> {
  const headers = new Headers();
  if (options.token !== undefined) headers.set("authorization", `Bearer ${options.token}`);
  if (options.authorization !== undefined) headers.set("authorization", options.authorization);
  if (options.body !== undefined) headers.set("content-type", JSON_TYPE);
  return new Request(new URL(path, INGRESS_URL), { method: options.method ?? "GET", headers, body: options.body ?? null });
}

const event = (e: Record<string, unknown>, over: Record<string, unknown> = {}) => JSON.stringify({ ...eventEnvelope(e), ...over });
const SQL_LOOKING_ID = `Ev1'); DROP TABLE receipts;--${uniqueId("x")}`;
const UNICODE_ID = `Év✓${uniqueId("")}`;
const goodSignature = async () => (await raw({})).headers.get("x-slack-signature") ?? "";
const ONE = { receipts: 1, outbox: 1 };
const STORED_SECRET = "stored-capability-part";

const cases: Case[] = [
  // Signatures and timestamps
  { name: "no X-Slack-Signature", request: () => raw({ signature: null }), status: 401 },
  { name: "no X-Slack-Request-Timestamp", request: () => raw({ timestamp: null, signature: `v0=${"a".repeat(64)}` }), status: 401 },
  { name: "neither header", request: () => raw({ timestamp: null, signature: null }), status: 401 },
  { name: "a v1= signature", request: async () => raw({ signature: (await goodSignature()).replace("v0=", "v1=") }), status: 401 },
  { name: "a signature one hex digit short", request: async () => raw({ signature: (await goodSignature()).slice(0, -1) }), status: 401 },
  { name: "a signature one hex digit long", request: async () => raw({ signature: `${await goodSignature()}0` }), status: 401 },
  {
    name: "a correct MAC in uppercase hex",
    request: async () => raw({ signature: `v0=${(await goodSignature()).slice(3).toUpperCase()}` }),
    status: 401,
  },
  { name: "a signature that is not hex", request: () => raw({ signature: `v0=${"g".repeat(64)}` }), status: 401 },
  { name: "an empty signature", request: () => raw({ signature: "" }), status: 401 },
  {
    name: "a signature with a trailing space inside",
    request: async () => raw({ signature: `${(await goodSignature()).slice(0, 40)} ${(await goodSignature()).slice(41)}` }),
    status: 401,
  },
  {
    name: "two signatures in one header",
    request: async () => raw({ signature: `${await goodSignature()}, ${await goodSignature()}` }),
    status: 401,
  },
  { name: "a signature made with an unknown secret", request: () => raw({ secret: "someone-elses-secret" }), status: 401 },
  { name: "a signature made with the previous secret", request: () => raw({ secret: TEST_PREVIOUS_SECRET }), status: 200, rows: ONE },
  { name: "a timestamp 301 s old", request: () => raw({ timestamp: String(nowSeconds() - 301) }), status: 401 },
  { name: "a timestamp 301 s in the future", request: () => raw({ timestamp: String(nowSeconds() + 301) }), status: 401 },
  { name: "a timestamp 299 s old", request: () => raw({ timestamp: String(nowSeconds() - 299) }), status: 200, rows: ONE },
  { name: "a timestamp 299 s in the future", request: () => raw({ timestamp: String(nowSeconds() + 299) }), status: 200, rows: ONE },
  { name: "a timestamp in milliseconds", request: () => raw({ timestamp: String(Date.now()) }), status: 401 },
  { name: "a timestamp with a fraction", request: () => raw({ timestamp: `${nowSeconds()}.5` }), status: 401 },
  { name: "a timestamp of zero", request: () => raw({ timestamp: "0" }), status: 401 },
  { name: "a negative timestamp", request: () => raw({ timestamp: "-1" }), status: 401 },
  { name: "a timestamp that is a word", request: () => raw({ timestamp: "yesterday" }), status: 401 },
  // Bodies
  { name: "an empty body", request: () => raw({ body: "" }), status: 400 },
  { name: "no body at all", request: () => raw({ body: null, signedBody: "" }), status: 400 },
  { name: "a body over the size limit", request: () => raw({ body: event(mention({ text: "x".repeat(600_000) })) }), status: 413 },
  {
    name: "a body truncated after signing",
    request: async () => raw({ body: event(mention()).slice(0, 40), signedBody: event(mention()) }),
    status: 401,
  },
  { name: "a body signed truncated (invalid JSON)", request: () => raw({ body: event(mention()).slice(0, 40) }), status: 400 },
  // UTF-8 decoding drops a leading BOM; the signature still covers it, so this is an authentic event.
  { name: "a byte-order mark before signed JSON", request: () => raw({ body: `\uFEFF${event(mention())}` }), status: 200, rows: ONE },
  // Content types
  { name: "text/plain", request: () => raw({ contentType: "text/plain" }), status: 400 },
  { name: "no content type", request: () => raw({ contentType: null }), status: 400 },
  { name: "multipart/form-data", request: () => raw({ contentType: "multipart/form-data; boundary=x" }), status: 400 },
  { name: "a form body labelled JSON", request: () => raw({ body: commandForm() }), status: 400 },
  { name: "a JSON body labelled as a form", request: () => raw({ contentType: FORM }), status: 400 },
  // Shapes
  { name: "JSON that is a number", request: () => raw({ body: "42" }), status: 400 },
  { name: "JSON null", request: () => raw({ body: "null" }), status: 400 },
  { name: "JSON that is a string", request: () => raw({ body: '"event_callback"' }), status: 400 },
  { name: "JSON that is an array", request: () => raw({ body: "[]" }), status: 400 },
  { name: "an object without type", request: () => raw({ body: '{"event_id":"Ev1"}' }), status: 400 },
  { name: "an event_callback without event_id", request: () => raw({ body: event(mention(), { event_id: undefined }) }), status: 400 },
  { name: "an event_callback with an empty event_id", request: () => raw({ body: event(mention(), { event_id: "" }) }), status: 400 },
  { name: "an event_callback with a numeric event_id", request: () => raw({ body: event(mention(), { event_id: 12345 }) }), status: 400 },
  {
    name: "an event_callback whose event is a string",
    request: () => raw({ body: event(mention(), { event: "app_mention" }) }),
    status: 400,
  },
  { name: "an event without a type", request: () => raw({ body: event({ channel: "C1", ts: "1.1" }) }), status: 400 },
  { name: "a 10 000-character event_id", request: () => raw({ body: event(mention(), { event_id: "E".repeat(10_000) }) }), status: 400 },
  { name: "url_verification without challenge", request: () => raw({ body: '{"type":"url_verification"}' }), status: 400 },
  {
    name: "url_verification with a numeric challenge",
    request: () => raw({ body: '{"type":"url_verification","challenge":7}' }),
    status: 400,
  },
  {
    name: "url_verification, answered and not recorded",
    request: () => raw({ body: '{"type":"url_verification","token":"t","challenge":"abc123"}' }),
    status: 200,
    body: (text) => expect(JSON.parse(text)).toEqual({ challenge: "abc123" }),
  },
  { name: "an envelope type nobody handles", request: () => raw({ body: '{"type":"app_rate_limited","team_id":"T1"}' }), status: 200 },
  // Forms
  { name: "a form with neither command nor payload", request: () => raw({ contentType: FORM, body: "hello=world" }), status: 400 },
  { name: "a payload that is not JSON", request: () => raw({ contentType: FORM, body: "payload=%7B%7B%7B" }), status: 400 },
  {
    name: "a payload that is JSON but not an object",
    request: () => raw({ contentType: FORM, body: `payload=${encodeURIComponent("[1,2]")}` }),
    status: 400,
  },
  { name: "a payload without type", request: () => raw({ contentType: FORM, body: interactionForm({ trigger_id: "t" }) }), status: 400 },
  {
    name: "a payload of an unknown type",
    request: () => raw({ contentType: FORM, body: interactionForm({ type: "future_thing", trigger_id: "t" }) }),
    status: 200,
  },
  {
    name: "a block action without trigger_id",
    request: () => raw({ contentType: FORM, body: interactionForm(blockActions({ trigger_id: undefined })) }),
    status: 400,
  },
  {
    name: "a slash command without trigger_id",
    request: () => raw({ contentType: FORM, body: commandForm({ trigger_id: "" }) }),
    status: 400,
  },
  {
    name: "a slash command not starting with /",
    request: () => raw({ contentType: FORM, body: commandForm({ command: "ackbox" }) }),
    status: 400,
  },
  {
    name: "a slash command with a 1 000-character trigger_id",
    request: () => raw({ contentType: FORM, body: commandForm({ trigger_id: "t".repeat(1000) }) }),
    status: 400,
  },
  // Content that is odd but legitimate: stored verbatim, harmless
  {
    name: "SQL-looking text in an event_id (stored verbatim)",
    request: () => raw({ body: event(mention(), { event_id: SQL_LOOKING_ID }) }),
    status: 200,
    rows: ONE,
    storedId: SQL_LOOKING_ID,
  },
  {
    name: "a unicode event_id and text (stored verbatim)",
    request: () => raw({ body: event(mention({ text: "héllo 👋 ✓" }), { event_id: UNICODE_ID }) }),
    status: 200,
    rows: ONE,
    storedId: UNICODE_ID,
  },
  {
    name: "a very long message text from a bot (ignored: no app answers a bot's message)",
    request: () =>
      raw({ body: event({ type: "message", channel: "C0NOPE", user: "U1", bot_id: "B1", ts: "1.1", text: "y".repeat(200_000) }) }),
    status: 200,
  },
  // Methods and paths
  { name: "GET /slack/events", request: () => raw({ method: "GET", body: null }), status: 405 },
  { name: "PUT /slack/events", request: () => raw({ method: "PUT" }), status: 405 },
  { name: "DELETE /slack/events", request: () => raw({ method: "DELETE", body: null }), status: 405 },
  { name: "POST /healthz", request: () => raw({ path: "/healthz" }), status: 405 },
  { name: "an unknown path", request: () => raw({ path: "/slack/event" }), status: 404 },
  { name: "a path with a trailing slash", request: () => raw({ path: "/slack/events/" }), status: 404 },
  { name: "the root", request: () => raw({ path: "/", method: "GET", body: null }), status: 404 },
  // The operator API
  { name: "admin backlog without a token", request: () => admin("/admin/backlog"), status: 401 },
  { name: "admin backlog with a wrong token", request: () => admin("/admin/backlog", { token: "wrong-token" }), status: 401 },
  {
    name: "admin backlog with the token one character short",
    request: () => admin("/admin/backlog", { token: TEST_ADMIN_TOKEN.slice(0, -1) }),
    status: 401,
  },
  { name: "admin backlog with the token and more", request: () => admin("/admin/backlog", { token: `${TEST_ADMIN_TOKEN}x` }), status: 401 },
  {
    name: "admin backlog with the token in Basic auth",
    request: () => admin("/admin/backlog", { authorization: `Basic ${TEST_ADMIN_TOKEN}` }),
    status: 401,
  },
  {
    name: "admin backlog with the token in the query string",
    request: () => admin(`/admin/backlog?token=${TEST_ADMIN_TOKEN}`),
    status: 401,
  },
  { name: "admin replay without a token", request: () => admin("/admin/replay", { method: "POST", body: '{"ids":[1]}' }), status: 401 },
  { name: "an unknown admin path without a token (disclosed as nothing)", request: () => admin("/admin/secret-things"), status: 401 },
  { name: "an unknown admin path with the token", request: () => admin("/admin/secret-things", { token: TEST_ADMIN_TOKEN }), status: 404 },
  {
    name: "admin replay with a body that is not JSON",
    request: () => admin("/admin/replay", { token: TEST_ADMIN_TOKEN, method: "POST", body: "ids=1" }),
    status: 400,
  },
  {
    name: "admin replay with ids that are not numbers",
    request: () => admin("/admin/replay", { token: TEST_ADMIN_TOKEN, method: "POST", body: '{"ids":["1; DELETE FROM outbox"]}' }),
    status: 400,
  },
  { name: "admin replay by GET", request: () => admin("/admin/replay", { token: TEST_ADMIN_TOKEN }), status: 405 },
  { name: "admin backlog by DELETE", request: () => admin("/admin/backlog", { token: TEST_ADMIN_TOKEN, method: "DELETE" }), status: 405 },
  {
    name: "admin backlog from an address after 10 failed attempts: throttled, even with the right token",
    request: async () => {
      const headers = { "cf-connecting-ip": "192.0.2.50" };
      for (let i = 0; i < 10; i++)
        await call(new Request(new URL("/admin/backlog", INGRESS_URL), { headers: { ...headers, authorization: "Bearer wrong" } }));
      return new Request(new URL("/admin/backlog", INGRESS_URL), { headers: { ...headers, authorization: `Bearer ${TEST_ADMIN_TOKEN}` } });
    },
    status: 429,
    body: (text) => expect(text).toBe("too many failed attempts\n"),
  },
  {
    name: "admin dead list over a stored response_url and token: answered redacted",
    request: async () => {
      await insertRow(env.DB, {
        status: "dead",
        effect: "response_url",
        payload: { url: `https://hooks.slack.com/commands/T1/2/${STORED_SECRET}`, body: { text: "x" }, bot_token: "xoxb-stored" },
      });
      return admin("/admin/dead", { token: TEST_ADMIN_TOKEN });
    },
    status: 200,
    rows: { receipts: 0, outbox: 1 },
    body: (text) => {
      expect(text).not.toContain(STORED_SECRET);
      expect(text).not.toContain("xoxb-stored");
      expect(text).toMatch(/\[redacted https:\/\/hooks\.slack\.com #[0-9a-f]{8}\]/);
    },
  },
  {
    // Slack signed it, so it is recorded; the consumer's outbound guard refuses to post to it (test/consumer/respond.effect.test.ts).
    name: "a slash command whose response_url is plain http on another port (recorded; never called)",
    request: () =>
      raw({
        contentType: FORM,
        body: commandForm({ response_url: "http://hooks.slack.com:8080/commands/T1/2/x", trigger_id: uniqueId("trig") }),
      }),
    status: 200,
    rows: ONE,
  },
  {
    name: "an audit trail of an event that does not exist",
    request: () => admin("/admin/events/Ev'%20OR%201=1--", { token: TEST_ADMIN_TOKEN }),
    status: 404,
  },
  { name: "an install page in single-workspace mode (no SLACK_CLIENT_ID)", request: redirect("code=c&state=s"), status: 404 },
  {
    name: "an install started by POST",
    request: async () => new Request(new URL("/slack/install", INGRESS_URL), { method: "POST" }),
    status: 405,
    env: OAUTH,
  },
  { name: "an OAuth redirect without a code", request: redirect("state=s1", "s1"), status: 400, env: OAUTH },
  { name: "an OAuth redirect without a state", request: redirect("code=c"), status: 400, env: OAUTH },
  {
    name: "an OAuth redirect whose state is not the browser's cookie",
    request: redirect("code=c&state=s1", "s2"),
    status: 400,
    env: OAUTH,
  },
  { name: "an OAuth redirect with a state never issued", request: redirect("code=c&state=never", "never"), status: 400, env: OAUTH },
  {
    name: "an OAuth redirect with Slack's error, carrying markup (escaped in the page)",
    request: redirect("error=%3Cscript%3Ealert(1)%3C/script%3E&state=s1", "s1"),
    status: 400,
    env: OAUTH,
    body: (text) => expect(text).not.toContain("<script>"),
  },
];

const SECRETS = [
  TEST_SIGNING_SECRET,
  TEST_PREVIOUS_SECRET,
  TEST_BOT_TOKEN,
  TEST_ADMIN_TOKEN,
  OAUTH.SLACK_CLIENT_SECRET,
  OAUTH.TOKEN_ENCRYPTION_KEY,
];
const logged: string[] = [];
const capture = (...args: unknown[]) => {
  logged.push(args.map(String).join(" "));
};
vi.spyOn(console, "log").mockImplementation(capture);
vi.spyOn(console, "warn").mockImplementation(capture);
vi.spyOn(console, "error").mockImplementation(capture);
afterAll(() => vi.restoreAllMocks());

beforeEach(() => resetAllShards());

async function call(request: Request, over?: Record<string, string>): Promise<Response> {
  const ctx = createExecutionContext();
  // The platform adds incoming cf properties; the handler does not read them.
  // Without a bot token the ingress makes no first attempt at the ack (shared/delivery/first-attempt.ts): this
  // corpus is about the ack, and its well-formed events' rows stay as the ack wrote them (attempts: 0).
  const base = { ...env, SLACK_BOT_TOKEN: "" };
  const response = await worker.fetch(request as Parameters<typeof worker.fetch>[0], over ? { ...base, ...over } : base, ctx);
  await waitOnExecutionContext(ctx);
  return response;
}

describe(`the bad-input corpus (${cases.length} cases)`, () => {
  it.each(cases)("$name → $status", async (c) => {
    logged.length = 0;
    const response = await call(await c.request(), c.env);
    const text = await response.text();
    expect(response.status).toBe(c.status);
    c.body?.(text);
    // On every shard: a refused input writes nothing anywhere; an accepted one, its receipt and row once.
    expect(await tallyAll()).toEqual({ ...(c.rows ?? { receipts: 0, outbox: 0 }), attempts: 0 });
    for (const db of shardDbs()) expect(await db.prepare("SELECT COUNT(*) AS n FROM installations").first("n")).toBe(0);
    if (c.storedId !== undefined) {
      const stored = [];
      for (const db of shardDbs()) {
        stored.push(...(await db.prepare("SELECT r.id, o.receipt_id FROM receipts r JOIN outbox o ON o.receipt_id = r.id").all()).results);
      }
      expect(stored).toEqual([{ id: c.storedId, receipt_id: c.storedId }]);
    }
    // Every answer is explained by a log line, and no line holds a secret.
    expect(logged.length).toBeGreaterThan(0);
    for (const line of logged) for (const secret of SECRETS) expect(line).not.toContain(secret);
    // Still serving: a well-formed event right after is accepted and recorded, through the same tables
    // and module state the case went through (a case that broke either fails here).
    const before = await tallyAll();
    const next = await call(await raw({ body: event(mention(), { event_id: uniqueId("EvNext") }) }));
    expect(next.status).toBe(200);
    expect(await tallyAll()).toEqual({ receipts: before.receipts + 1, outbox: before.outbox + 1, attempts: 0 });
  });

  it("still accepts a well-formed event after the whole corpus", async () => {
    const response = await call(await raw({ body: event(mention(), { event_id: uniqueId("EvAfter") }) }));
    expect(response.status).toBe(200);
    expect(await tallyAll()).toEqual({ receipts: 1, outbox: 1, attempts: 0 });
    const tables = await env.DB.prepare("SELECT name FROM sqlite_master WHERE type = 'table' AND name = 'receipts'").all();
    expect(tables.results).toHaveLength(1);
  });
});
