/**
 * THE RULE for what in a stored payload is a credential, in one place: what
 * an operator answer redacts (/admin/dead, /admin/events/<id>, and so the CLI
 * and the dashboard, which read those) and what a finished row's stored
 * payload drops (shared/outbox/fence.ts, shared/outbox/scrub.ts).
 *
 * A value is a credential when, anywhere in the payload (nested objects and
 * arrays included):
 *
 * - by NAME: its key says so — token, secret, password/passwd, authorization,
 *   api key, private key, cookie, session, signature, credential(s) — or the
 *   key is a URL field (`url`, `*_url`, `webhook`) holding an http(s) URL: a
 *   URL handed to an effect is a capability (a response_url lets anyone post
 *   into that user's conversation; a webhook URL is its own key);
 * - by SHAPE, whatever its key: a Slack token (`xox?-…`, `xapp-…`, a custom
 *   step's workflow token `xwfp-…`) or a Slack hook URL (https://hooks.slack.com/…).
 *
 * A credential is replaced by a short, non-reversible description that keeps
 * rows distinguishable: `[redacted https://hooks.slack.com #1a2b3c4d]` for a
 * URL (its origin and a fingerprint), `[redacted #1a2b3c4d]` otherwise. The
 * fingerprint is the first 8 hex digits of the value's SHA-256: enough to
 * tell two rows' URLs apart, far too little to recover a 100-character
 * secret path.
 *
 * Payload fields that are not credentials (channel, text, blocks, ts) are
 * kept: they are what an operator needs to tell what a row was for.
 */

const SECRET_NAME = /token|secret|passw(or)?d|authori[sz]ation|api[_-]?key|private[_-]?key|cookie|session|signature|credential/i;
const URL_NAME = /^(url|.*_url|webhook.*)$/i;
const SECRET_SHAPE = /^(xox[a-z]-|xapp-|xwf[a-z]-)|^https:\/\/hooks\.slack\.com\//i;
const HTTP_URL = /^https?:\/\//i;
const REDACTED = /^\[redacted( \S+)? #[0-9a-f]{8}\]$/;

/** Whether the value under `key` is a credential (see the rule above). */
export function isCredential(key: string | undefined, value: unknown): boolean {
  if (typeof value !== "string" || value === "" || REDACTED.test(value)) return false;
  if (SECRET_SHAPE.test(value)) return true;
  if (key === undefined) return false;
  if (SECRET_NAME.test(key)) return true;
  return URL_NAME.test(key) && HTTP_URL.test(value);
}

/** The payload with every credential replaced by its description. `changed` says whether anything was. */
export async function redactCredentials(value: unknown): Promise<{ value: unknown; changed: boolean }> {
  let changed = false;
  const walk = async (node: unknown, key: string | undefined): Promise<unknown> => {
    if (isCredential(key, node)) {
      changed = true;
      return describeCredential(node as string);
    }
    if (Array.isArray(node)) return Promise.all(node.map((item) => walk(item, key)));
    if (typeof node === "object" && node !== null) {
      const entries = await Promise.all(Object.entries(node).map(async ([k, v]) => [k, await walk(v, k)] as const));
      return Object.fromEntries(entries);
    }
    return node;
  };
  const result = await walk(value, undefined);
  return { value: result, changed };
}

/**
 * A stored payload (JSON text) with its credentials redacted, or undefined
 * when it holds none (the caller then leaves the stored text as it is).
 * Text that is not JSON is left alone: there is no field to classify.
 */
export async function scrubStoredPayload(text: string): Promise<string | undefined> {
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    return undefined;
  }
  const { value, changed } = await redactCredentials(parsed);
  return changed ? JSON.stringify(value) : undefined;
}

/**
 * Free text (an effect's thrown message, stored as last_error and in the
 * attempts, logged, shown to operators) has no field names to classify, so the
 * SHAPE half of the rule applies, and more broadly: a Slack token becomes
 * `[redacted token]`, and every http(s) URL is cut to its origin — a
 * response_url, a hook URL and a third-party webhook carry their secret in the
 * path or the query. An app's `throw new Error(\`could not post to ${url}\`)`
 * then says where, not how to post there.
 */
export function scrubFreeText(text: string): string {
  // No \b before the prefix: a token right after a letter or digit ("%3Dxoxb-…", URL-encoded) is one too.
  const tokensOut = text.replace(/(?:xox[a-z]|xapp|xwf[a-z])-[A-Za-z0-9-]+/g, "[redacted token]");
  // "https:\/\/host\/path" too: JSON as Slack (and PHP) write it escapes every slash, and an app may throw a raw body.
  return tokensOut.replace(/\bhttps?:\\?\/\\?\/[^\s/\\?#"'<>]+[^\s"'<>]*/gi, (match) => {
    // Punctuation closing the sentence is the text's, not the URL's.
    const trailing = /[.,:;!)\]]+$/.exec(match)?.[0] ?? "";
    const url = match.slice(0, match.length - trailing.length);
    const origin = /^https?:\\?\/\\?\/[^\s/\\?#"'<>]+/i.exec(url)?.[0] ?? url;
    // userinfo (https://user:pass@host) is dropped with the rest.
    const host = origin.replace(/(\/)[^/@]*@/, "$1");
    return `${url.length > origin.length ? `${host}/[redacted]` : host}${trailing}`;
  });
}

export async function describeCredential(secret: string): Promise<string> {
  const digest = new Uint8Array(await crypto.subtle.digest("SHA-256", new TextEncoder().encode(secret)));
  const fingerprint = Array.from(digest.subarray(0, 4), (b) => b.toString(16).padStart(2, "0")).join("");
  if (HTTP_URL.test(secret)) {
    try {
      return `[redacted ${new URL(secret).origin} #${fingerprint}]`;
    } catch {
      // Not a parsable URL after all: no origin to keep.
    }
  }
  return `[redacted #${fingerprint}]`;
}
