/**
 * The settings every workerd test project runs with. Imported by
 * vitest.config.ts (in Node) to become bindings, and by tests (in workerd) to
 * sign requests and check what was called.
 */
export const TEST_SIGNING_SECRET = "test-signing-secret-0123456789abcdef";
export const TEST_PREVIOUS_SECRET = "test-previous-secret-fedcba9876543210";
export const TEST_BOT_TOKEN = "xoxb-test-bot-token";
export const TEST_ADMIN_TOKEN = "test-admin-token-5f3c9a0e7b1d48c6a2f9";
export const TEST_SLACK_API_URL = "https://slack.test/api/";

export const TEST_SETTINGS: Record<string, string> = {
  SLACK_SIGNING_SECRET: TEST_SIGNING_SECRET,
  SLACK_SIGNING_SECRET_PREVIOUS: TEST_PREVIOUS_SECRET,
  SLACK_BOT_TOKEN: TEST_BOT_TOKEN,
  SLACK_API_URL: TEST_SLACK_API_URL,
  ADMIN_TOKEN: TEST_ADMIN_TOKEN,
  WATCHED_CHANNELS: "C0WATCHED,C0ALSO",
  RESPONSE_URL_HOSTS: "hooks.slack.com,127.0.0.1",
  ALERT_CHANNEL: "C0ALERTS",
  EXAMPLE_ANSWER_URL: "https://answers.test/answer",
  SHARD_COUNT: "2",
};

/**
 * The test projects run with two shards (issue 15), so the multi-shard paths
 * are what every run tests: shard 0 is the wrangler file's `DB`, shard 1 this
 * extra local database.
 */
export const TEST_SHARD_BINDINGS: Record<string, string> = { DB: "ackbox", DB_1: "ackbox-shard-1" };
