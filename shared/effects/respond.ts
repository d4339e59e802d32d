import { EffectError, fatal } from "../delivery/failure.ts";
import { isObject } from "../slack/inputs.ts";
import { httpFailure, refusal } from "../slack/web-api.ts";
import { type EffectDefinition, requireString } from "./effect.ts";
import { guardedFetch } from "./outbound.ts";

/** Slack accepts a response_url for 30 minutes after the command. */
export const RESPONSE_URL_LIFETIME_MS = 30 * 60 * 1000;
/** … and at most 5 times. */
export const RESPONSE_URL_MAX_USES = 5;
/** Slack answers a response_url with "ok" or a short JSON error: 4 KiB is all that is ever worth reading. */
export const RESPONSE_URL_READ_BYTES = 4096;

/**
 * A POST of a message to a slash command's or an interaction's response_url.
 *
 * Written here rather than with slack-web-api-client's WebhookSender, which
 * folds every failure into status -1: the status is what tells an expired or
 * used-up URL (404/410: park) from Slack being down (5xx: retry).
 *
 * Its limits are Slack's: the row's deadline is the command's time + 30
 * minutes (decideOnFailure parks a retry that would land after it), and the
 * effect gives up after 5 attempts, since every attempt may have used the URL.
 */
export const respond: EffectDefinition = {
  name: "response_url",
  idempotentByShape: false,
  maxAttempts: RESPONSE_URL_MAX_USES,
  async perform(payload, { responseUrlHosts, timeoutMs, edge }) {
    const url = requireString(payload, "url", "response_url");
    if (!isObject(payload.body)) throw fatal("response_url: payload has no message body");
    // outbound.ts decides: allowed host, https on 443, no redirect followed, a bounded read.
    const post = guardedFetch({ hosts: responseUrlHosts, timeoutMs, maxBodyBytes: RESPONSE_URL_READ_BYTES }, "response_url", edge);
    const response = await post(url, {
      method: "POST",
      headers: { "content-type": "application/json; charset=utf-8" },
      body: JSON.stringify(payload.body),
    });
    const text = (await response.text().catch(() => "")).slice(0, 200);
    if (response.status === 200) {
      // A 200 can still carry a refusal ({"ok":false,"error":…}): that is an
      // answer, not a success. (The fault-injection suite found this one.)
      const refused = okFalseError(text);
      if (refused === undefined) return { status: 200 };
      throw refusal("response_url", refused);
    }
    const failure = httpFailure("response_url", response.status, response.headers.get("retry-after"));
    // Keep Slack's explanation (expired_url, used_url, …) in the row's last error.
    if (failure.failure.kind === "rate_limited" || text === "") throw failure;
    throw new EffectError({ ...failure.failure, message: `${failure.message} ${text}` });
  },
};

/** The error of a `{"ok":false,"error":…}` body, if that is what it is. */
function okFalseError(text: string): string | undefined {
  if (!text.startsWith("{")) return undefined;
  try {
    const body: unknown = JSON.parse(text);
    if (isObject(body) && body.ok === false) return typeof body.error === "string" ? body.error : "ok:false";
  } catch {
    // Not JSON: Slack's plain "ok".
  }
  return undefined;
}
