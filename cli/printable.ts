/**
 * Text from the server — a row's last error carries up to 200 characters of
 * a remote body, payloads are whatever Slack or an app put there — reaches
 * the operator's terminal. An escape sequence in it could move the cursor,
 * rewrite earlier lines, retitle the window or hide text; a bidi override
 * could make it read backwards. So every human-readable line the CLI writes
 * goes through `printable`: C0 controls (but newline and tab), DEL, C1
 * controls and the bidi embedding/override/isolate characters are shown as
 * visible escapes (`\x1b`, `\u202e`). --json output is left exact: a JSON
 * encoder already escapes C0 controls, and a program reads it, not a terminal.
 */
// biome-ignore lint/suspicious/noControlCharactersInRegex: matching control characters is the point
const UNSAFE = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u200e\u200f\u202a-\u202e\u2066-\u2069]/g;

export function printable(text: string): string {
  return text.replace(UNSAFE, (c) => {
    const code = c.charCodeAt(0);
    return code <= 0xff ? `\\x${code.toString(16).padStart(2, "0")}` : `\\u${code.toString(16).padStart(4, "0")}`;
  });
}
