import { describe, expect, it } from "vitest";
import { ActivityMeter, REFUSED_TEAMS_PER_MINUTE, RESOLUTION_MS, teamOfUnverified } from "../../shared/ops/activity.ts";

const MINUTE_START = 30 * RESOLUTION_MS;

describe("ActivityMeter: what one isolate writes of the teams' activity", () => {
  it("is due once per team, kind and minute; again in the next minute", () => {
    const meter = new ActivityMeter();
    expect(meter.due("seen", "T1", MINUTE_START)).toBe(true);
    expect(meter.due("seen", "T1", MINUTE_START + 59_999)).toBe(false);
    expect(meter.due("seen", "T2", MINUTE_START + 1)).toBe(true);
    expect(meter.due("refused", "T1", MINUTE_START + 2)).toBe(true);
    expect(meter.due("refused", "T1", MINUTE_START + 3)).toBe(false);
    expect(meter.due("seen", "T1", MINUTE_START + RESOLUTION_MS)).toBe(true);
  });

  it(`records at most ${REFUSED_TEAMS_PER_MINUTE} teams a minute from requests refused by their signature (their team id is unverified)`, () => {
    const meter = new ActivityMeter();
    const due = Array.from({ length: REFUSED_TEAMS_PER_MINUTE + 5 }, (_, i) => meter.due("refused", `T${i}`, MINUTE_START));
    expect(due.filter(Boolean)).toHaveLength(REFUSED_TEAMS_PER_MINUTE);
    expect(meter.due("seen", "T99", MINUTE_START)).toBe(true); // signed requests are not capped
    expect(meter.due("refused", "T98", MINUTE_START + RESOLUTION_MS)).toBe(true);
  });

  it("forgets the minute before once a new one starts, and writes nothing for a request timed before it", () => {
    const meter = new ActivityMeter();
    meter.due("seen", "T1", MINUTE_START + RESOLUTION_MS);
    expect(meter.due("seen", "T2", MINUTE_START)).toBe(false);
  });
});

describe("teamOfUnverified: the team a request refused by its signature names", () => {
  it("reads an event's, a command's and an interaction's team as a signed one would be read", () => {
    const event = JSON.stringify({ type: "event_callback", event_id: "Ev1", team_id: "T0TEAM", event: { type: "message" } });
    expect(teamOfUnverified("application/json", event)).toBe("T0TEAM");
    const command = new URLSearchParams({
      command: "/go",
      team_id: "T0CMD",
      channel_id: "C1",
      user_id: "U1",
      response_url: "https://hooks.slack.com/x",
      trigger_id: "t",
    });
    expect(teamOfUnverified("application/x-www-form-urlencoded", command.toString())).toBe("T0CMD");
    const click = new URLSearchParams({ payload: JSON.stringify({ type: "block_actions", team: { id: "T0BTN" }, trigger_id: "t" }) });
    expect(teamOfUnverified("application/x-www-form-urlencoded", click.toString())).toBe("T0BTN");
  });

  it("is undefined for a body that names no team, or nothing shaped like one", () => {
    expect(teamOfUnverified("application/json", "not json")).toBeUndefined();
    expect(teamOfUnverified("application/json", JSON.stringify({ type: "url_verification", challenge: "c" }))).toBeUndefined();
    const odd = (team: string) => JSON.stringify({ type: "event_callback", event_id: "Ev1", team_id: team, event: { type: "x" } });
    for (const team of ["", "team one", "t0lower", `T${"0".repeat(40)}`])
      expect(teamOfUnverified("application/json", odd(team))).toBeUndefined();
  });
});
