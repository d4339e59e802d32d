/**
 * GET /admin: the operator's page. One self-contained HTML document (no
 * external assets, no framework) that draws the backlog over time from the
 * sweeper's samples, shows the health checks and the figures, lists dead
 * rows with their audit trail, and replays a selection.
 *
 * Why the page itself needs no token: a browser cannot send a bearer header
 * on a navigation. So the page is a static shell holding no data and no
 * secret; the operator pastes the token, the page keeps it in sessionStorage
 * (this tab only, gone when it closes) and sends it as a bearer header to the
 * JSON endpoints, which are what the token protects. Kept longer only when the
 * operator ticks "remember on this device": then also in localStorage, until
 * Forget. Not by default: the token is the whole operator API (replay, dead
 * rows' payloads), and localStorage keeps it on disk, in every tab and
 * window of the origin, for anyone at that browser profile — fine on an
 * operator's own machine, not on a shared or borrowed one. (An HttpOnly
 * cookie would hide it from scripts, but is the second scheme declined
 * below; the strict CSP is what keeps other scripts off this page.) With ADMIN_TOKEN unset
 * the page is a 404 like the rest of /admin. (Answering the shell with a 401
 * too would need HTTP Basic auth, a second scheme the API would have to
 * accept and browsers cache and replay; and the shell says nothing the API's
 * own 401, `Bearer realm="ackbox-admin"`, does not. docs/operating.md.)
 *
 * A strict Content-Security-Policy with a fresh nonce per response: only this
 * page's own script and style run, it may only talk to its own origin, and it
 * cannot be framed. Text from the database (errors, payloads) is only ever
 * set as textContent, never as HTML.
 */

export function dashboardResponse(): Response {
  const nonce = crypto.randomUUID().replace(/-/g, "");
  const csp = [
    "default-src 'none'",
    `script-src 'nonce-${nonce}'`,
    `style-src 'nonce-${nonce}'`,
    "connect-src 'self'",
    "img-src 'self' data:",
    "base-uri 'none'",
    "form-action 'none'",
    "frame-ancestors 'none'",
  ].join("; ");
  return new Response(page(nonce), {
    headers: {
      "content-type": "text/html; charset=utf-8",
      "content-security-policy": csp,
      "x-content-type-options": "nosniff",
      "referrer-policy": "no-referrer",
      "cache-control": "no-store",
    },
  });
}

const STYLE = `
:root { --bg:#f7f7f5; --fg:#1d1d1f; --muted:#6b6b70; --line:#dcdcd6; --ok:#1f7a3d; --bad:#b3261e; --pending:#2f6fde; --leased:#d98a00; --dead:#b3261e; }
* { box-sizing: border-box; }
body { margin: 0; font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; background: var(--bg); color: var(--fg); }
header { display: flex; gap: 12px; align-items: center; padding: 12px 20px; border-bottom: 1px solid var(--line); background: #fff; }
header h1 { font-size: 16px; margin: 0 12px 0 0; }
header input { width: 260px; padding: 6px 8px; border: 1px solid var(--line); border-radius: 6px; font: inherit; }
button { padding: 6px 12px; border: 1px solid var(--line); border-radius: 6px; background: #fff; font: inherit; cursor: pointer; }
button.primary { background: var(--fg); color: #fff; border-color: var(--fg); }
button:disabled { opacity: .5; cursor: default; }
#status { color: var(--muted); }
#status.error { color: var(--bad); font-weight: 600; }
main { padding: 16px 20px; display: grid; gap: 16px; }
section { background: #fff; border: 1px solid var(--line); border-radius: 10px; padding: 14px 16px; }
section h2 { font-size: 13px; text-transform: uppercase; letter-spacing: .04em; color: var(--muted); margin: 0 0 10px; }
#health { font-size: 15px; font-weight: 600; }
#health.ok { color: var(--ok); } #health.bad { color: var(--bad); }
#checks { margin: 6px 0 0; padding-left: 18px; color: var(--muted); }
#checks li.breached { color: var(--bad); }
#tiles { display: grid; grid-template-columns: repeat(auto-fill, minmax(150px, 1fr)); gap: 10px; }
.tile { border: 1px solid var(--line); border-radius: 8px; padding: 8px 10px; }
.tile .label { color: var(--muted); font-size: 12px; }
.tile .value { font-size: 22px; font-weight: 600; font-variant-numeric: tabular-nums; }
#chart svg { width: 100%; height: 220px; display: block; }
.legend { display: flex; gap: 16px; color: var(--muted); font-size: 12px; margin-top: 6px; }
.legend .pending { color: var(--pending); } .legend .leased { color: var(--leased); } .legend .dead { color: var(--dead); }
table { width: 100%; border-collapse: collapse; font-size: 13px; }
th, td { text-align: left; padding: 6px 8px; border-bottom: 1px solid var(--line); vertical-align: top; }
th { color: var(--muted); font-weight: 500; }
td.error { font-family: ui-monospace, Menlo, monospace; font-size: 12px; max-width: 420px; word-break: break-word; }
td a { color: var(--pending); cursor: pointer; text-decoration: underline; }
.actions { display: flex; gap: 8px; align-items: center; margin-top: 10px; }
pre { background: #f2f2ee; padding: 10px; border-radius: 6px; overflow: auto; max-height: 360px; font-size: 12px; }
.empty { color: var(--muted); }
`;

const SCRIPT = `
"use strict";
const KEY = "ackbox-admin-token";
/** This tab's token; else the one this device was asked to remember (an opt-in: see the comment at the top). */
const savedToken = () => sessionStorage.getItem(KEY) || localStorage.getItem(KEY) || "";
const $ = (id) => document.getElementById(id);
const el = (tag, attrs, text) => { const e = document.createElement(tag); for (const k in (attrs || {})) e.setAttribute(k, attrs[k]); if (text !== undefined) e.textContent = String(text); return e; };
const SVG = "http://www.w3.org/2000/svg";
const svg = (tag, attrs) => { const e = document.createElementNS(SVG, tag); for (const k in attrs) e.setAttribute(k, String(attrs[k])); return e; };
let timer = null;

function setStatus(text, error) { const s = $("status"); s.textContent = text; s.className = error ? "error" : ""; }

async function api(path, init) {
  const token = savedToken();
  const headers = Object.assign({ authorization: "Bearer " + token }, (init && init.headers) || {});
  const response = await fetch(path, Object.assign({}, init || {}, { headers }));
  if (response.status === 401) throw new Error("401: wrong or missing token");
  if (response.status === 404) throw new Error("404: the operator API is off (ADMIN_TOKEN unset) or this is not ackbox");
  const body = await response.json();
  if (!response.ok) throw new Error(response.status + ": " + (body.error || "request failed"));
  return body;
}

function age(seconds) {
  if (seconds === null || seconds === undefined) return "–";
  if (seconds < 90) return seconds + " s";
  if (seconds < 5400) return Math.round(seconds / 60) + " min";
  return Math.round(seconds / 360) / 10 + " h";
}
function pct(r) { return r === null || r === undefined ? "–" : Math.round(r * 1000) / 10 + " %"; }

function renderHealth(b) {
  const h = $("health");
  h.textContent = b.healthy ? "Healthy" : "Unhealthy: " + b.health.filter((c) => c.breached).map((c) => c.kind).join(", ");
  h.className = b.healthy ? "ok" : "bad";
  const list = $("checks"); list.replaceChildren();
  for (const c of b.health) list.append(el("li", { class: c.breached ? "breached" : "" }, c.kind + ": " + c.detail));
  // A dead alert post: ALERT_CHANNEL cannot be posted to, so alerts are only logged until the row is replayed.
  const p = b.lastAlertPost;
  // Alert posts live on shard 0: with several shards its ref is "0:<id>".
  const postRef = p && (b.shards ? "0:" + p.id : String(p.id));
  if (p && p.status === "dead") list.append(el("li", { class: "breached", "data-alert-channel": "dead" }, "alert channel: the last alert post (row " + postRef + ", channel " + (p.channel || "–") + ") died of " + (p.error || "an error") + "; alerts are only logged until it is replayed (npx ackbox dead replay --id " + postRef + ")"));
}

function renderTiles(b) {
  const w = (s) => b.windows.find((x) => x.seconds === s) || {};
  const q = b.queue.available ? b.queue.backlogCount : "n/a";
  const tiles = [
    ["Pending", b.outbox.pending + (b.outbox.capped ? "+" : "")], ["Leased", b.outbox.leased], ["Dead", b.outbox.dead],
    ["Oldest pending", age(b.outbox.oldestPendingAgeSeconds)], ["Stale leases", b.outbox.staleLeases],
    ["Never enqueued", b.outbox.neverEnqueued], ["Done (1 h)", w(3600).done], ["Failure rate (5 min)", pct(w(300).failureRate)],
    ["Failure rate (1 h)", pct(w(3600).failureRate)], ["Queue backlog", q],
  ];
  const box = $("tiles"); box.replaceChildren();
  for (const [label, value] of tiles) {
    const t = el("div", { class: "tile", "data-tile": label });
    t.append(el("div", { class: "label" }, label), el("div", { class: "value" }, value === undefined ? "–" : value));
    box.append(t);
  }
  // With several shards (SHARD_COUNT > 1): the tiles are the sums (oldest: the max); this says which shard holds what.
  const shards = $("shards"); shards.replaceChildren();
  if (!b.shards) return;
  const table = el("table"); const head = el("tr");
  for (const h of ["shard", "pending", "leased", "dead", "oldest pending", "stale leases", "overdue"]) head.append(el("th", {}, h));
  table.append(head);
  for (const s of b.shards) {
    const tr = el("tr", { "data-shard": String(s.shard) });
    for (const v of [s.shard, s.pending + (s.capped ? "+" : ""), s.leased, s.dead, age(s.oldestPendingAgeSeconds), s.staleLeases, s.overdue]) tr.append(el("td", {}, v));
    table.append(tr);
  }
  shards.append(table);
}

function renderChart(history) {
  const box = $("chart"); box.replaceChildren();
  if (!history || history.length === 0) { box.append(el("p", { class: "empty" }, "No samples yet: the sweeper records one per cron tick.")); return; }
  const W = 900, H = 220, L = 44, R = 10, T = 10, B = 24;
  const xs = history.map((s) => Date.parse(s.at));
  const x0 = Math.min(...xs), x1 = Math.max(...xs, x0 + 1);
  const series = [["pending", "var(--pending)"], ["leased", "var(--leased)"], ["dead", "var(--dead)"]];
  const ymax = Math.max(1, ...history.flatMap((s) => series.map(([k]) => s[k] || 0)));
  const X = (t) => L + ((t - x0) / (x1 - x0)) * (W - L - R);
  const Y = (v) => T + (1 - v / ymax) * (H - T - B);
  const root = svg("svg", { viewBox: "0 0 " + W + " " + H, role: "img", "aria-label": "backlog over time" });
  // Whole numbers, each once and drawn at its own height (a top of 1 has no middle line: not "1, 1, 0").
  for (const v of [...new Set([0, Math.round(ymax / 2), ymax])]) {
    root.append(svg("line", { x1: L, x2: W - R, y1: Y(v), y2: Y(v), stroke: "#e4e4de" }));
    const label = svg("text", { x: L - 6, y: Y(v) + 4, "text-anchor": "end", "font-size": 11, fill: "#6b6b70" });
    label.textContent = String(v); root.append(label);
  }
  // The first and the last sample's minute; one label when they are the same minute (one sample, or a short span).
  const minute = (t) => new Date(t).toISOString().slice(11, 16) + " UTC";
  for (const [t, anchor] of minute(x0) === minute(x1) ? [[x0, "start"]] : [[x0, "start"], [x1, "end"]]) {
    const label = svg("text", { x: X(t), y: H - 6, "text-anchor": anchor, "font-size": 11, fill: "#6b6b70" });
    label.textContent = minute(t); root.append(label);
  }
  for (const [key, color] of series) {
    const points = history.map((s, i) => X(xs[i]).toFixed(1) + "," + Y(s[key] || 0).toFixed(1)).join(" ");
    root.append(svg("polyline", { points, fill: "none", stroke: color, "stroke-width": 2, "data-series": key }));
  }
  box.append(root);
  const legend = el("div", { class: "legend" });
  for (const [key] of series) legend.append(el("span", { class: key }, "\\u25A0 " + key));
  legend.append(el("span", {}, history.length + " samples"));
  box.append(legend);
}

function renderDead(page) {
  const body = $("dead-rows"); body.replaceChildren();
  if (page.rows.length === 0) { const tr = el("tr"); tr.append(el("td", { colspan: "7", class: "empty" }, "No dead rows.")); body.append(tr); }
  for (const r of page.rows) {
    // The ref names the row for replay: "<shard>:<id>" with several shards, the id with one.
    const tr = el("tr", { "data-id": r.ref, "data-shard": String(r.shard) });
    const box = el("input", { type: "checkbox", value: r.ref });
    const cell = el("td"); cell.append(box);
    const link = el("a", { "data-receipt": r.receiptId }, r.receiptId);
    link.addEventListener("click", () => showTrail(r.receiptId, r.shard));
    const receipt = el("td"); receipt.append(link);
    tr.append(cell, el("td", {}, r.ref), receipt, el("td", {}, r.effect), el("td", {}, r.teamId || ""), el("td", { class: "error" }, (r.maybePerformed ? "[may have been performed] " : "") + (r.lastError || "")), el("td", {}, r.diedAt.replace("T", " ").slice(0, 19)));
    body.append(tr);
  }
  $("dead-more").textContent = page.nextCursor ? "More dead rows exist: use npx ackbox dead list --cursor " + page.nextCursor : "";
}

function renderBlocked(answer, backlog) {
  const box = $("blocked"); box.replaceChildren();
  if (answer.mode !== "distributed" && answer.installations.length === 0) { box.append(el("div", { class: "empty" }, "Single-workspace mode (SLACK_BOT_TOKEN): no installations.")); return; }
  const blocked = answer.installations.filter((i) => i.blocked);
  box.append(el("div", {}, answer.installations.length + " installation(s), " + blocked.length + " blocked"));
  const list = el("ul");
  for (const i of blocked) list.append(el("li", { "data-install": i.installKey, class: "error" }, (i.teamId || "(org-wide " + i.enterpriseId + ")") + ": " + i.blockedReason + " — its rows wait until it is re-installed"));
  // Teams whose rows wait (from the backlog): blocked ones with their rows, and teams with no installation at all.
  for (const t of (backlog && backlog.blockedTeams) || []) list.append(el("li", { "data-waiting-team": t.teamId, class: "error" }, "team " + t.teamId + " " + (t.state === "blocked" ? "blocked (" + t.reason + ")" : "not installed") + ": " + t.rows + " row(s) waiting since " + String(t.waitingSince).replace("T", " ").slice(0, 19) + " UTC"));
  box.append(list);
}

// Workspaces the ingress heard nothing signed from for longer than Slack's retry window: each with the backfill that recovers it.
function renderGaps(b) {
  const box = $("gaps"); box.replaceChildren();
  const gaps = b.deliveryGaps || [];
  if (gaps.length === 0) return;
  box.append(el("div", {}, "Delivery gaps (last 7 days): workspaces the ingress heard nothing signed from for longer than Slack's retry window. Many at once, or requests refused by their signature in one, is an outage; backfill handles what was missed, once each."));
  const list = el("ul");
  const at = (iso) => String(iso).replace("T", " ").slice(0, 19);
  for (const g of gaps) list.append(el("li", { "data-gap": g.teamId }, g.teamId + ": silent " + at(g.from) + " → " + at(g.until) + " UTC" + (g.refusedFrom ? " (requests refused by their signature since " + at(g.refusedFrom) + ")" : "") + " — " + g.backfill));
  box.append(list);
}

// The dead row's shard is known: the trail is read from that shard alone.
async function showTrail(id, shard) {
  try { $("trail").textContent = JSON.stringify(await api("/admin/events/" + encodeURIComponent(id) + "?shard=" + shard), null, 2); }
  catch (e) { $("trail").textContent = String(e.message || e); }
}

const describeReplay = (r, dryRun) => (dryRun ? "Dry run: would replay " : "Replayed ") + r.count + " row(s)" + (r.shardCount > 1 ? " (" + r.perShard.map((p) => "shard " + p.shard + ": " + p.replayed).join(", ") + ")" : "") + (r.skipped.length ? "; skipped " + r.skipped.map((s) => s.ref + " (" + s.reason + ")").join(", ") : "") + ".";

// "Replay selected" looks first: a dry run, its count on the page, and a question; only a yes replays.
async function replay(dryRun) {
  const ids = [...document.querySelectorAll("#dead-rows input:checked")].map((b) => b.value);
  if (ids.length === 0) { $("result").textContent = "Select dead rows first."; return; }
  const post = (dry) => api("/admin/replay", { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ ids, dryRun: dry }) });
  try {
    const preview = await post(true);
    $("result").textContent = describeReplay(preview, true);
    if (dryRun) return;
    if (preview.count === 0) { $("result").textContent += " Nothing to replay."; return; }
    // A ticked row is named by id, so one whose effect may have happened is replayed too: the question says how many.
    const maybe = preview.replayed.filter((r) => r.maybePerformed).length;
    const warning = maybe === 0 ? "" : " " + maybe + " of them may have been performed already (marked [may have been performed]): if they were, Slack gets them twice. Check each with its audit trail first.";
    if (!confirm("Replay " + preview.count + " dead row(s)? Their effects are sent to Slack again." + warning)) { $("result").textContent += " Replay cancelled: nothing changed."; return; }
    $("result").textContent = describeReplay(await post(false), false);
    await load();
  } catch (e) { $("result").textContent = String(e.message || e); }
}

async function load() {
  if (!savedToken()) { setStatus("Paste the ADMIN_TOKEN to begin.", false); return; }
  setStatus("Loading…", false);
  try {
    const [backlog, dead, installations] = await Promise.all([api("/admin/backlog?hours=" + $("hours").value), api("/admin/dead?limit=50"), api("/admin/installations")]);
    renderHealth(backlog); renderTiles(backlog); renderChart(backlog.history); renderDead(dead); renderBlocked(installations, backlog); renderGaps(backlog);
    setStatus("Updated " + backlog.at.replace("T", " ").slice(0, 19) + " UTC", false);
    document.body.dataset.loaded = "true";
  } catch (e) { setStatus(String(e.message || e), true); document.body.dataset.loaded = "error"; }
}

$("save").addEventListener("click", () => {
  const v = $("token").value.trim();
  if (v) { sessionStorage.setItem(KEY, v); if ($("remember").checked) localStorage.setItem(KEY, v); else localStorage.removeItem(KEY); }
  $("token").value = ""; load();
});
$("forget").addEventListener("click", () => { sessionStorage.removeItem(KEY); localStorage.removeItem(KEY); location.reload(); });
$("remember").checked = localStorage.getItem(KEY) !== null;
$("hours").addEventListener("change", load);
$("dryrun").addEventListener("click", () => replay(true));
$("replay").addEventListener("click", () => replay(false));
load();
timer = setInterval(load, 30000);
`;

function page(nonce: string): string {
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="no-referrer">
<link rel="icon" href="data:,">
<title>ackbox · operator</title>
<style nonce="${nonce}">${STYLE}</style>
</head>
<body>
<header>
  <h1>ackbox · operator</h1>
  <input id="token" type="password" autocomplete="off" placeholder="ADMIN_TOKEN" aria-label="ADMIN_TOKEN">
  <label><input id="remember" type="checkbox"> remember on this device</label>
  <button id="save" class="primary">Use token</button>
  <button id="forget">Forget</button>
  <label>history <select id="hours"><option value="1">1 h</option><option value="6" selected>6 h</option><option value="24">24 h</option><option value="48">48 h</option></select></label>
  <span id="status"></span>
</header>
<main>
  <section><h2>Health</h2><div id="health">–</div><ul id="checks"></ul><div id="gaps"></div></section>
  <section><h2>Now</h2><div id="tiles"></div><div id="shards"></div></section>
  <section><h2>Installations</h2><div id="blocked">–</div></section>
  <section><h2>Backlog over time</h2><div id="chart"></div></section>
  <section>
    <h2>Dead rows (newest first)</h2>
    <table><thead><tr><th></th><th>row</th><th>event / operation</th><th>effect</th><th>team</th><th>last error</th><th>died (UTC)</th></tr></thead><tbody id="dead-rows"></tbody></table>
    <div id="dead-more" class="empty"></div>
    <div class="actions"><button id="dryrun">Dry run</button><button id="replay" class="primary">Replay selected</button><span id="result"></span></div>
  </section>
  <section><h2>Audit trail</h2><pre id="trail" class="empty">Click an event id above.</pre></section>
</main>
<script nonce="${nonce}">${SCRIPT}</script>
</body>
</html>`;
}
