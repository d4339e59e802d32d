/**
 * The test fake Slack's own check: a test that scripts an answer no call uses,
 * or makes a call nothing scripted, fails (test/support/fake-slack.ts).
 */
import { afterEach, describe, expect, it } from "vitest";
import { expectSettled, type FakeSlack, fakeSlack, reply } from "../support/fake-slack.ts";
import { TEST_SLACK_API_URL } from "../support/settings.ts";

let fake: FakeSlack | undefined;
afterEach(() => fake?.restore());

const call = (method: string) => fetch(`${TEST_SLACK_API_URL}${method}`, { method: "POST", body: "channel=C1" });

describe("the fake Slack's end-of-test check", () => {
  it("passes when every scripted answer was used and every call scripted", async () => {
    fake = fakeSlack().script("chat.postMessage", reply.ok());
    await call("chat.postMessage");
    expect(() => expectSettled(fake as FakeSlack)).not.toThrow();
  });

  it("fails on a scripted answer left unused", async () => {
    fake = fakeSlack().script("chat.postMessage", reply.ok(), reply.error("ratelimited"));
    await call("chat.postMessage");
    expect(() => expectSettled(fake as FakeSlack)).toThrow(/scripted Slack answers that no call used/);
  });

  it("fails on a call nothing scripted", async () => {
    fake = fakeSlack();
    await call("reactions.add");
    expect(() => expectSettled(fake as FakeSlack)).toThrow(/calls to Slack that the test did not script/);
  });
});
