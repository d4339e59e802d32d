/**
 * `.dev.vars` files, read and written the way wrangler reads them: wrangler
 * parses `.dev.vars` with the `dotenv` package's `parse` (no `$VAR`
 * expansion), so this parser is the same grammar — `KEY=value`, an optional
 * `export `, single, double or backtick quotes (only double quotes expand
 * `\n`), `#` comments — and the writer only emits values that parse back to
 * exactly themselves.
 */

// dotenv's own line grammar (dotenv/lib/main.js, BSD-2-Clause).
const LINE =
  /(?:^|^)\s*(?:export\s+)?([\w.-]+)(?:\s*=\s*?|:\s+?)(\s*'(?:\\'|[^'])*'|\s*"(?:\\"|[^"])*"|\s*`(?:\\`|[^`])*`|[^#\r\n]+)?\s*(?:#.*)?(?:$|$)/gm;

export function parseDotenv(text: string): Record<string, string> {
  const values: Record<string, string> = {};
  const lines = text.replace(/\r\n?/g, "\n");
  for (const match of lines.matchAll(LINE)) {
    const key = match[1];
    if (key === undefined) continue;
    let value = (match[2] ?? "").trim();
    const quote = value[0];
    value = value.replace(/^(['"`])([\s\S]*)\1$/gm, "$2");
    if (quote === '"') value = value.replace(/\\n/g, "\n").replace(/\\r/g, "\r");
    values[key] = value;
  }
  return values;
}

/** One `KEY=value` line whose value parses back unchanged; throws for a value no quoting can carry. */
export function dotenvLine(key: string, value: string): string {
  if (!/^[A-Za-z_][\w.-]*$/.test(key)) throw new Error(`not a valid variable name: ${JSON.stringify(key)}`);
  if (/^[\w.,:/@*+=?&%~-]*$/.test(value)) return `${key}=${value}`;
  if (value.includes("\n") || value.includes("\r")) {
    if (value.includes('"') || value.includes("\\n") || value.includes("\\r")) throw unquotable(key);
    return `${key}="${value.replace(/\n/g, "\\n").replace(/\r/g, "\\r")}"`;
  }
  for (const quote of ["'", '"', "`"]) {
    if (!value.includes(quote) && !(quote === '"' && /\\[nr]/.test(value))) return `${key}=${quote}${value}${quote}`;
  }
  throw unquotable(key);
}

function unquotable(key: string): Error {
  return new Error(`the value of ${key} mixes quotes and line breaks in a way a .dev.vars file cannot hold`);
}

export function formatDotenv(values: Readonly<Record<string, string>>, header = ""): string {
  const lines = Object.entries(values).map(([key, value]) => dotenvLine(key, value));
  return `${header}${lines.join("\n")}\n`;
}
