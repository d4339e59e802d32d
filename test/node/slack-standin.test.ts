/**
 * The local Slack stand-in, driven by the same client the Workers use
 * (slack-web-api-client, form-encoded, Bearer token) and by a response_url
 * POST the way the consumer sends it (JSON).
 */
import { request } from "node:http";
import { SlackAPIClient, SlackAPIError } from "slack-web-api-client";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import {
  fetchStandinCalls,
  fetchStandinThread,
  MISSING_CHANNEL,
  openStandinAssistantThread,
  type SlackStandin,
  startSlackStandin,
  startStandinExecution,
  stopStandinStream,
  tellStandinMessage,
} from "../../cli/local/slack-standin.ts";
import { modelTurn } from "../../shared/app/fake-model.ts";

describe("Slack stand-in", () => {
  let standin: SlackStandin;
  let printed: string[];
  let slack: SlackAPIClient;

  beforeEach(async () => {
    printed = [];
    standin = await startSlackStandin({ print: (line) => printed.push(line) });
    slack = new SlackAPIClient("xoxb-test", { baseUrl: standin.apiUrl, retryHandlers: [], logLevel: "ERROR", throwSlackAPIError: true });
  });
  afterEach(async () => {
    await standin.close();
  });

  it("listens on loopback only", () => {
    expect(standin.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    expect(standin.apiUrl).toBe(`${standin.url}/api/`);
  });

  it("refuses a browser page's request to its control endpoints (an Origin header), so no site can plant history or revoke tokens", async () => {
    const message = JSON.stringify({ channel: "C1", message: { ts: "1764504000.000100", text: "planted" } });
    const fromPage = await fetch(`${standin.url}/_standin/messages`, {
      method: "POST",
      headers: { "content-type": "text/plain", origin: "https://evil.example" },
      body: message,
    });
    expect(fromPage.status).toBe(403);
    const history = await slack.conversations.history({ channel: "C1" });
    expect(history.messages).toEqual([]);
    expect((await fetch(`${standin.url}/_standin/revoke?team=T0A`, { method: "POST", headers: { origin: "null" } })).status).toBe(403);
    // A local tool (Node's fetch sends no Origin) is served.
    expect((await fetch(`${standin.url}/_standin/messages`, { method: "POST", body: message })).status).toBe(200);
  });

  it("refuses a request naming another host on any path (a DNS rebinding's same-origin GET sends no Origin), and serves one naming a loopback name", async () => {
    await slack.chat.postMessage({ channel: "C1", text: "seen" });
    const port = new URL(standin.url).port;
    const get = (host: string, path = "/_standin/calls") =>
      new Promise<{ status: number; body: string }>((resolve, reject) => {
        const req = request(`${standin.url}${path}`, { headers: { host } }, (res) => {
          let body = "";
          res.on("data", (chunk) => (body += chunk));
          res.on("end", () => resolve({ status: res.statusCode ?? 0, body }));
        });
        req.on("error", reject).end();
      });
    const rebound = await get(`attacker.example:${port}`);
    expect(rebound.status).toBe(403);
    expect(rebound.body).not.toContain("seen");
    expect((await get(`127.0.0.1.attacker.example:${port}`)).status).toBe(403);
    expect((await get(`attacker.example:${port}`, "/oauth/v2/authorize?redirect_uri=https://a.test/&state=s")).status).toBe(403);
    for (const host of [`127.0.0.1:${port}`, `localhost:${port}`, `[::1]:${port}`, "LOCALHOST"]) {
      const served = await get(host);
      expect(served.status, host).toBe(200);
      expect(served.body).toContain("seen");
    }
  });

  it("answers the example app: views.publish of a Home tab, and its answer service, which honours Idempotency-Key", async () => {
    await expect(slack.views.publish({ user_id: "U1", view: { type: "home", blocks: [] } })).resolves.toMatchObject({
      ok: true,
      view: { type: "home" },
    });
    const notHome = await slack.views.publish({ user_id: "U1", view: { type: "modal" } as never }).catch((e: unknown) => e);
    expect((notHome as SlackAPIError).error).toBe("invalid_arguments");

    const ask = (key: string, question: string) =>
      fetch(`${standin.url}/example/answer`, {
        method: "POST",
        headers: { "content-type": "application/json", "idempotency-key": key },
        body: JSON.stringify({ question }),
      }).then((r) => r.json());
    const first = await ask("k1", "why?");
    expect(await ask("k1", "why?")).toEqual(first); // a repeated key: the first answer again
    expect(await ask("k2", "why?")).not.toEqual(first);
    expect(printed.at(-1)).toMatch(/^example\.answer question="why\?" idempotency-key=k2 → answer=/);
  });

  it("answers the reference app's Web API calls in Slack's shapes", async () => {
    const first = await slack.chat.postMessage({ channel: "C1", text: "hello", thread_ts: "1.000100" });
    const second = await slack.chat.postMessage({ channel: "C1", text: "again" });
    expect(first).toMatchObject({ ok: true, channel: "C1", message: { text: "hello", thread_ts: "1.000100", bot_id: "B0ACKBOX" } });
    expect(first.ts).toMatch(/^\d{10}\.\d{6}$/);
    expect(second.ts).not.toBe(first.ts);

    await expect(slack.reactions.add({ channel: "C1", timestamp: "1.000200", name: "eyes" })).resolves.toMatchObject({ ok: true });
    // A repeat is Slack's already_reacted, which the reference app counts as success.
    const repeat = await slack.reactions.add({ channel: "C1", timestamp: "1.000200", name: "eyes" }).catch((e: unknown) => e);
    expect(repeat).toBeInstanceOf(SlackAPIError);
    expect((repeat as SlackAPIError).error).toBe("already_reacted");

    await expect(slack.chat.update({ channel: "C1", ts: "1.000300", text: "clicked" })).resolves.toMatchObject({
      ok: true,
      channel: "C1",
      ts: "1.000300",
      text: "clicked",
    });
    const view = { type: "modal" as const, title: { type: "plain_text" as const, text: "Feedback" }, blocks: [] };
    await expect(slack.views.open({ trigger_id: "123.456.abc", view })).resolves.toMatchObject({
      ok: true,
      view: { type: "modal", title: { text: "Feedback" } },
    });
    const noText = await slack.chat.postMessage({ channel: "C1" } as never).catch((e: unknown) => e);
    expect((noText as SlackAPIError).error).toBe("no_text");

    const { calls, counts, total } = await fetchStandinCalls(standin.url);
    expect(total).toBe(7);
    expect(counts).toEqual({ "chat.postMessage": 3, "reactions.add": 2, "chat.update": 1, "views.open": 1 });
    expect(calls.map((c) => c.method)).toEqual([
      "chat.postMessage",
      "chat.postMessage",
      "reactions.add",
      "reactions.add",
      "chat.update",
      "views.open",
      "chat.postMessage",
    ]);
    expect(calls[0]?.params).toMatchObject({ channel: "C1", text: "hello", thread_ts: "1.000100" });
    expect(JSON.parse(calls[5]?.params.view ?? "{}")).toMatchObject({ title: { text: "Feedback" } }); // objects arrive JSON-encoded in the form
    expect(printed).toHaveLength(7);
    expect(printed[0]).toBe(`chat.postMessage channel=C1 thread_ts=1.000100 text="hello" → ok ts=${first.ts}`);
    expect(printed[3]).toBe("reactions.add :eyes: on channel=C1 ts=1.000200 → error already_reacted");
  });

  it("says what kind each of its conversations is (conversations.info), and lists those it holds messages of (users.conversations)", async () => {
    const kind = async (channel: string) => {
      const { channel: c } = await slack.conversations.info({ channel });
      return [c?.is_channel, c?.is_private, c?.is_im];
    };
    expect(await kind("C0PUB")).toEqual([true, false, false]);
    expect(await kind("G0PRIV")).toEqual([false, true, false]);
    expect(await kind("D0DM")).toEqual([false, true, true]);
    for (const channel of ["G0PRIV", "C0PUB"]) {
      const posted = await fetch(`${standin.url}/_standin/messages`, {
        method: "POST",
        body: JSON.stringify({ channel, message: { ts: "1764504000.000100", text: "x" } }),
      });
      expect(posted.status).toBe(200);
    }
    const listed = await slack.users.conversations({ types: ["public_channel", "private_channel"] });
    expect(listed.channels?.map((c) => c.id)).toEqual(["C0PUB", "G0PRIV"]);
  });

  it("answers without a token the way Slack does", async () => {
    const anonymous = new SlackAPIClient(undefined, {
      baseUrl: standin.apiUrl,
      retryHandlers: [],
      logLevel: "ERROR",
      throwSlackAPIError: true,
    });
    const error = await anonymous.chat.postMessage({ channel: "C1", text: "x" }).catch((e: unknown) => e);
    expect((error as SlackAPIError).error).toBe("not_authed");
  });

  it("takes response_url posts as JSON and refuses anything else", async () => {
    const url = standin.responseUrl("commands/T0/1/abc");
    const ok = await fetch(url, {
      method: "POST",
      headers: { "content-type": "application/json; charset=utf-8" },
      body: JSON.stringify({ response_type: "ephemeral", text: "Done" }),
    });
    expect(ok.status).toBe(200);
    expect(await ok.json()).toEqual({ ok: true });
    const bad = await fetch(url, { method: "POST", body: "not json" });
    expect(bad.status).toBe(400);
    const nowhere = await fetch(`${standin.url}/elsewhere`, { method: "POST", body: "{}" });
    expect(nowhere.status).toBe(404);

    const { calls } = await fetchStandinCalls(standin.url);
    expect(calls.map((c) => [c.method, c.path, c.answer.status])).toEqual([
      ["response_url", "/commands/T0/1/abc", 200],
      ["response_url", "/commands/T0/1/abc", 400],
    ]);
    expect(calls[0]?.json).toEqual({ response_type: "ephemeral", text: "Done" });
    expect(printed[0]).toBe('response_url /commands/T0/1/abc ephemeral text="Done" → ok');
    // `since` lists only what came after.
    expect((await fetchStandinCalls(standin.url, calls[0]?.seq)).calls).toHaveLength(1);
  });

  it("answers channel_not_found for the missing channel, whatever the method: the demo's labelled failure", async () => {
    for (const call of [
      () => slack.chat.postMessage({ channel: MISSING_CHANNEL, text: "hello" }),
      () => slack.reactions.add({ channel: MISSING_CHANNEL, timestamp: "1.000100", name: "eyes" }),
      () => slack.chat.update({ channel: MISSING_CHANNEL, ts: "1.000100", text: "x" }),
    ]) {
      const error = await call().catch((e: unknown) => e);
      expect((error as SlackAPIError).error).toBe("channel_not_found");
    }
    await expect(slack.chat.postMessage({ channel: "C1", text: "elsewhere is fine" })).resolves.toMatchObject({ ok: true });
    expect(printed[0]).toBe(`chat.postMessage channel=${MISSING_CHANNEL} text="hello" → error channel_not_found`);
  });

  it("marks blocks and attachments in its log line, so the text is not taken for the whole message", async () => {
    const blocks = [
      { type: "section", text: { type: "mrkdwn", text: "*Deploy?*" } },
      { type: "actions", elements: [{ type: "button", text: { type: "plain_text", text: "Approve" }, action_id: "approve" }] },
    ] as const;
    await slack.chat.postMessage({ channel: "C1", text: "Deploy?", blocks: [...blocks] } as never);
    await slack.chat.update({ channel: "C1", ts: "1.000300", text: "done", attachments: [{ text: "details", fallback: "details" }] });
    await slack.chat.postMessage({ channel: "C1", text: "plain", blocks: [] });
    await fetch(standin.responseUrl("commands/T0/1/abc"), {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ text: "Done", blocks: [{ type: "divider" }] }),
    });
    expect(printed[0]).toMatch(/^chat\.postMessage channel=C1 text="Deploy\?" \+blocks\(2\) → ok ts=/);
    expect(printed[1]).toMatch(/^chat\.update channel=C1 ts=1\.000300 text="done" \+attachments\(1\) → ok/);
    expect(printed[2]).not.toContain("+blocks"); // an empty list carries nothing
    expect(printed[3]).toBe('response_url /commands/T0/1/abc  text="Done" +blocks(1) → ok');
  });
  it("installs like Slack's OAuth: the authorize page redirects with a one-time code, oauth.v2.access trades it (both grant types), and keeps no token", async () => {
    const authorize = async (query: string) => {
      const response = await fetch(
        `${standin.url}/oauth/v2/authorize?redirect_uri=${encodeURIComponent("http://127.0.0.1:1/slack/oauth_redirect")}&state=st&scope=chat:write&${query}`,
        { redirect: "manual" },
      );
      expect(response.status).toBe(302);
      const location = new URL(response.headers.get("location") ?? "");
      expect(location.searchParams.get("state")).toBe("st");
      return location.searchParams.get("code") ?? "";
    };
    const access = async (params: Record<string, string>) => {
      const response = await fetch(`${standin.apiUrl}oauth.v2.access`, {
        method: "POST",
        headers: { "content-type": "application/x-www-form-urlencoded" },
        body: new URLSearchParams({ client_id: "1.2", client_secret: "s", ...params }),
      });
      return (await response.json()) as Record<string, unknown>;
    };

    const plain = await access({ code: await authorize("team=T0TWO") });
    expect(plain).toMatchObject({ ok: true, token_type: "bot", scope: "chat:write", team: { id: "T0TWO" }, is_enterprise_install: false });
    expect(plain.access_token).toMatch(/^xoxb-local-T0TWO-/);
    expect(plain.refresh_token).toBeUndefined();

    const code = await authorize("team=T0ROT&rotate=1");
    const rotating = await access({ code });
    expect(rotating).toMatchObject({ ok: true, expires_in: 43_200 });
    expect(rotating.access_token).toMatch(/^xoxe\.xoxb-local-T0ROT-/);
    expect(await access({ code })).toEqual({ ok: false, error: "invalid_code" });

    const refreshed = await access({ grant_type: "refresh_token", refresh_token: String(rotating.refresh_token) });
    expect(refreshed).toMatchObject({ ok: true, team: { id: "T0ROT" }, expires_in: 43_200 });
    expect(refreshed.access_token).not.toBe(rotating.access_token);
    // A refresh token is single-use: the second refresh with it is refused.
    expect(await access({ grant_type: "refresh_token", refresh_token: String(rotating.refresh_token) })).toEqual({
      ok: false,
      error: "invalid_refresh_token",
    });

    const orgWide = await access({ code: await authorize("org_wide=1&enterprise=E0ORG") });
    expect(orgWide).toMatchObject({ ok: true, team: null, enterprise: { id: "E0ORG" }, is_enterprise_install: true });

    const kept = JSON.stringify(standin.snapshot()) + printed.join("\n");
    expect(kept).not.toMatch(/xox[a-z]-|local-code|client_secret/);
  });

  it("records whose token each call carried (never the token), and refuses an expired or revoked one as Slack does", async () => {
    let now = Date.parse("2027-01-15T12:00:00Z");
    const timed = await startSlackStandin({ now: () => now });
    try {
      const install = async (query: string) => {
        const response = await fetch(
          `${timed.url}/oauth/v2/authorize?redirect_uri=${encodeURIComponent("http://127.0.0.1:1/slack/oauth_redirect")}&state=s&${query}`,
          { redirect: "manual" },
        );
        const code = new URL(response.headers.get("location") ?? "").searchParams.get("code") ?? "";
        const answer = await fetch(`${timed.apiUrl}oauth.v2.access`, {
          method: "POST",
          body: new URLSearchParams({ client_id: "1.2", client_secret: "s", code }),
        }).then((r) => r.json() as Promise<{ access_token: string; expires_in?: number }>);
        return answer;
      };
      const post = (token: string, ts: string) =>
        fetch(`${timed.apiUrl}chat.postMessage`, {
          method: "POST",
          headers: { authorization: `Bearer ${token}` },
          body: new URLSearchParams({ channel: "C1", text: "hi", thread_ts: ts }),
        }).then((r) => r.json() as Promise<{ ok: boolean; error?: string }>);

      const a = await install("team=T0A");
      const b = await install("team=T0B&rotate=1&expires_in=60");
      expect(b.expires_in).toBe(60);
      expect(await post(a.access_token, "1.1")).toMatchObject({ ok: true });
      expect(await post(b.access_token, "1.2")).toMatchObject({ ok: true });
      expect(await post("xoxb-not-issued-here", "1.3")).toMatchObject({ ok: true }); // a single-workspace token
      now += 60_000; // T0B's token expires at its 60th second
      expect(await post(b.access_token, "1.4")).toEqual({ ok: false, error: "token_expired" });
      const revoked = await fetch(`${timed.url}/_standin/revoke?team=T0A`, { method: "POST" }).then((r) => r.json());
      expect(revoked).toEqual({ ok: true, revoked: 1 });
      expect(await post(a.access_token, "1.5")).toEqual({ ok: false, error: "token_revoked" });

      const calls = timed.snapshot().calls.filter((c) => c.method === "chat.postMessage");
      expect(calls.map((c) => [c.params.thread_ts, c.token])).toEqual([
        ["1.1", { issuedTo: "T0A", n: 1 }],
        ["1.2", { issuedTo: "T0B", n: 2 }],
        ["1.3", null],
        ["1.4", { issuedTo: "T0B", n: 2 }],
        ["1.5", { issuedTo: "T0A", n: 1 }],
      ]);
      expect(JSON.stringify(timed.snapshot())).not.toMatch(/xox[a-z]-local|xoxe/);
    } finally {
      await timed.close();
    }
  });

  it("plays a workflow's custom step: an execution and its workflow token, one completion, the token revoked then, 15 minutes at most", async () => {
    let now = Date.UTC(2026, 10, 30, 12, 0, 0);
    const timed = await startSlackStandin({ now: () => now });
    try {
      const start = () => startStandinExecution(timed.url, "ackbox_echo", "T0A");
      const call = (method: string, token: string, params: Record<string, string>) =>
        fetch(`${timed.apiUrl}${method}`, {
          method: "POST",
          headers: { authorization: `Bearer ${token}` },
          body: new URLSearchParams(params),
        }).then((r) => r.json() as Promise<{ ok: boolean; error?: string }>);
      const one = await start();
      const two = await start();
      expect(one.executionId).toMatch(/^Fx0LOCAL/);
      expect(one.token).toMatch(/^xwfp-local-/);
      const success = (token: string, id: string) =>
        call("functions.completeSuccess", token, { function_execution_id: id, outputs: JSON.stringify({ text: "hi" }) });

      expect(await success(two.token, one.executionId)).toEqual({ ok: false, error: "access_denied" }); // another execution's token
      expect(await success("xoxb-not-issued-here", one.executionId)).toEqual({ ok: false, error: "access_denied" }); // a bot token
      expect(await call("chat.postMessage", one.token, { channel: "C1", text: "asked" })).toMatchObject({ ok: true });
      expect(await success(one.token, one.executionId)).toEqual({ ok: true });
      // Completed: its token is revoked, and the execution takes no second completion.
      expect(await success(one.token, one.executionId)).toEqual({ ok: false, error: "token_revoked" });
      expect(await success(two.token, one.executionId)).toEqual({ ok: false, error: "execution_not_in_running_state" });
      expect(await success(two.token, "Fx0NEVER")).toEqual({ ok: false, error: "function_execution_not_found" });
      expect(await call("functions.completeError", two.token, { function_execution_id: two.executionId })).toEqual({
        ok: false,
        error: "invalid_arguments",
      });
      expect(await call("chat.postMessage", "xwfp-not-issued-here", { channel: "C1", text: "x" })).toEqual({
        ok: false,
        error: "invalid_auth",
      });
      now += 15 * 60_000; // the second execution's token dies 15 minutes after it was issued
      expect(await call("functions.completeError", two.token, { function_execution_id: two.executionId, error: "late" })).toEqual({
        ok: false,
        error: "token_expired",
      });

      const completions = timed.snapshot().calls.filter((c) => c.method.startsWith("functions."));
      expect(completions[3]?.token).toEqual({ issuedTo: `workflow ${one.executionId} (T0A)`, n: 1 });
      expect(JSON.stringify(timed.snapshot())).not.toMatch(/xwfp-local/);
    } finally {
      await timed.close();
    }
  });
});

describe("Slack stand-in: assistant threads and streams (issue 39)", () => {
  const DM = "D0ASSIST";
  let standin: SlackStandin;
  let printed: string[];
  let slack: SlackAPIClient;
  let now: number;

  beforeEach(async () => {
    printed = [];
    now = Date.UTC(2026, 0, 5, 9, 0, 0);
    standin = await startSlackStandin({ print: (line) => printed.push(line), now: () => now });
    slack = new SlackAPIClient("xoxb-test", { baseUrl: standin.apiUrl, retryHandlers: [], logLevel: "ERROR", throwSlackAPIError: false });
  });
  afterEach(async () => {
    await standin.close();
  });

  const askIn = async () => {
    const { thread_ts } = await openStandinAssistantThread(standin.url, DM, "U0ASKER");
    now += 1000; // the question a second after the thread opened, the answer a second after that
    const question = { type: "message", user: "U0ASKER", text: "What is ackbox?", ts: `${Math.floor(now / 1000)}.500000`, thread_ts };
    await tellStandinMessage(standin.url, DM, question);
    now += 1000;
    return { thread_ts, question };
  };

  it("streams an answer into a thread as Slack does, clears the status with it, and shows the thread back over HTTP and conversations.replies", async () => {
    const { thread_ts, question } = await askIn();
    expect(await slack.assistant.threads.setStatus({ channel_id: DM, thread_ts, status: "is thinking…" })).toMatchObject({ ok: true });
    const started = await slack.chat.startStream({ channel: DM, thread_ts, markdown_text: "An engine" });
    expect(started).toMatchObject({ ok: true, channel: DM, ts: expect.stringMatching(/^\d{10}\.\d{6}$/) });
    const ts = started.ts as string;
    await slack.chat.appendStream({ channel: DM, ts, markdown_text: " for Slack apps" });
    // (slack-web-api-client's types predate markdown_text on chat.update; Slack takes it.)
    expect(await slack.chat.update({ channel: DM, ts, markdown_text: "no" } as never)).toMatchObject({
      ok: false,
      error: "streaming_state_conflict",
    });
    await slack.chat.stopStream({ channel: DM, ts, markdown_text: "." });

    const { thread, overlaps } = await fetchStandinThread(standin.url, DM, thread_ts);
    expect(overlaps).toEqual([]);
    expect(thread.messages.map((m) => [m.from, m.text])).toEqual([
      ["app", ""],
      ["user", "What is ackbox?"],
      ["app", "An engine for Slack apps."],
    ]);
    expect(thread.messages[2]).toMatchObject({
      streaming: false,
      ended: "stopStream",
      leftStreaming: false,
      counts: { started: 1, appended: 1, stopped: 1 },
    });
    expect(thread.status).toBeUndefined();
    expect(thread.statusLog.map((c) => c.cause)).toEqual(["setStatus", "reply"]);

    const replies = await slack.conversations.replies({ channel: DM, ts: thread_ts, oldest: question.ts });
    expect(replies.messages?.map((m) => [m.user, m.bot_id, m.text])).toEqual([
      [standin.streams.bot.user, "B0ACKBOX", "An engine for Slack apps."],
    ]);
    expect(printed.filter((line) => line.startsWith("chat."))).toEqual([
      `chat.startStream channel=${DM} thread_ts=${thread_ts} markdown_text="An engine" → ok ts=${ts}`,
      `chat.appendStream channel=${DM} ts=${ts} markdown_text=" for Slack apps" → ok ts=${ts}`,
      `chat.update channel=${DM} ts=${ts} markdown_text="no" → error streaming_state_conflict`,
      `chat.stopStream channel=${DM} ts=${ts} markdown_text="." → ok ts=${ts}`,
    ]);
  });

  it("stops a stream when the user presses stop, returning agent_session_stopped's fields; appends then answer message_not_in_streaming_state", async () => {
    const { thread_ts } = await askIn();
    const ts = (await slack.chat.startStream({ channel: DM, thread_ts, markdown_text: "Half" })).ts as string;
    expect(await stopStandinStream(standin.url, DM, ts)).toEqual({
      type: "agent_session_stopped",
      channel: DM,
      thread_ts,
      user: "U0ASKER",
      event_ts: expect.stringMatching(/^\d+\.\d{6}$/),
      streaming_message_ts: [ts],
    });
    expect(await slack.chat.appendStream({ channel: DM, ts, markdown_text: " more" })).toMatchObject({
      ok: false,
      error: "message_not_in_streaming_state",
    });
    const refused = await fetch(`${standin.url}/_standin/stop`, {
      method: "POST",
      headers: { origin: "https://evil.example" },
      body: "{}",
    });
    expect(refused.status).toBe(403);
  });

  it("closes a stream five minutes after its start on its clock, and chat.update repairs it", async () => {
    const { thread_ts } = await askIn();
    const ts = (await slack.chat.startStream({ channel: DM, thread_ts, markdown_text: "Long" })).ts as string;
    now += 5 * 60_000;
    expect(await slack.chat.appendStream({ channel: DM, ts, markdown_text: " answer" })).toMatchObject({
      ok: false,
      error: "message_not_in_streaming_state",
    });
    expect((await fetchStandinThread(standin.url, DM, thread_ts)).thread.messages.at(-1)).toMatchObject({
      ended: "expired",
      leftStreaming: true,
    });
    expect(await slack.chat.update({ channel: DM, ts, markdown_text: "Long answer." } as never)).toMatchObject({ ok: true });
    expect((await fetchStandinThread(standin.url, DM, thread_ts)).thread.messages.at(-1)).toMatchObject({
      text: "Long answer.",
      leftStreaming: false,
    });
  });

  it("still updates a message it never saw (a demo's button message) as before", async () => {
    expect(await slack.chat.update({ channel: "C1", ts: "1.000300", text: "clicked" })).toMatchObject({
      ok: true,
      ts: "1.000300",
      text: "clicked",
    });
  });
});

describe("Slack stand-in: the fake model at /model/v1", () => {
  const KEY = "sk-local-model-key-42";
  let standin: SlackStandin;
  let printed: string[];
  let slept: number[];

  beforeEach(async () => {
    printed = [];
    slept = [];
    standin = await startSlackStandin({
      print: (line) => printed.push(line),
      model: {
        apiKey: KEY,
        sleep: async (ms) => {
          slept.push(ms);
        },
      },
    });
  });
  afterEach(async () => {
    await standin.close();
  });

  const ask = (key: string, init: { signal?: AbortSignal } = {}) =>
    fetch(`${standin.url}/model/v1/chat/completions`, {
      method: "POST",
      headers: { authorization: `Bearer ${key}`, "content-type": "application/json", "idempotency-key": "row-7" },
      body: JSON.stringify({ model: "local", messages: [{ role: "user", content: "Why?" }], stream: true }),
      ...init,
    });

  it("streams a canned answer as OpenAI's events, 40 chunks after 400 ms then every 90 ms, and prints the call without its key", async () => {
    const response = await ask(KEY);
    expect(response.headers.get("content-type")).toBe("text/event-stream; charset=utf-8");
    const text = await response.text();
    const events = text.split("\n\n").filter(Boolean);
    expect(events.at(-1)).toBe("data: [DONE]");
    const contents = events
      .slice(0, -1)
      .map((e) => JSON.parse(e.slice("data: ".length)) as { choices: { delta: { content?: string } }[] })
      .map((c) => c.choices[0]?.delta.content)
      .filter((c) => c !== undefined);
    expect(contents).toHaveLength(40);
    expect(contents.join("")).toMatch(/^You asked: "Why\?"\. .* It was asked with 0 earlier messages of this thread's history\.$/);
    expect(slept).toEqual([400, ...Array.from({ length: 39 }, () => 90)]);
    const call = standin.snapshot().calls.at(-1);
    expect(call).toMatchObject({
      kind: "service",
      method: "model.chat.completions",
      idempotencyKey: "row-7",
      model: { authorized: true, outcome: "stop", chunks: 40 },
    });
    expect(printed.at(-1)).toMatch(
      /^model\.chat\.completions model=local messages=1 idempotency-key=row-7 key=ok → 200 stop chunks=40 first-token=\d+ms in \d+ms text="You asked/,
    );
    expect(JSON.stringify(standin.snapshot()) + printed.join("\n")).not.toContain(KEY);
  });

  it("answers a wrong key 401 in OpenAI's shape", async () => {
    const response = await ask("sk-wrong");
    expect(response.status).toBe(401);
    expect(await response.json()).toMatchObject({ error: { type: "invalid_request_error", code: "invalid_api_key" } });
    expect(printed.at(-1)).toMatch(/key=wrong → 401 unauthorized/);
  });

  it("ends a stalled turn when the client goes away", async () => {
    standin.model.script(modelTurn.stall(2));
    const client = new AbortController();
    const response = await ask(KEY, { signal: client.signal });
    const reader = (response.body as ReadableStream<Uint8Array>).getReader();
    const decoder = new TextDecoder();
    let seen = "";
    while ((seen.match(/"content"/g) ?? []).length < 2) seen += decoder.decode((await reader.read()).value, { stream: true });
    client.abort();
    for (let i = 0; i < 200 && standin.snapshot().counts["model.chat.completions"] === undefined; i += 1)
      await new Promise((resolve) => setTimeout(resolve, 10));
    expect(standin.snapshot().calls.at(-1)).toMatchObject({ model: { outcome: "aborted", chunks: 2 } });
  });
});
