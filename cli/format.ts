/** Plain-text rendering for people: aligned tables, short times and ages. */

export type Align = "left" | "right";

export interface Column<T> {
  readonly title: string;
  readonly value: (row: T) => string | number | null | undefined;
  readonly align?: Align;
  /** Longer cells are cut with an ellipsis (the full text is in --json). */
  readonly max?: number;
}

export function table<T>(rows: readonly T[], columns: readonly Column<T>[], indent = ""): string {
  const cells = rows.map((row) => columns.map((c) => clip(text(c.value(row)), c.max)));
  const widths = columns.map((c, i) => Math.max(c.title.length, ...cells.map((r) => r[i]?.length ?? 0)));
  const line = (values: string[]) =>
    indent +
    values
      .map((v, i) => (columns[i]?.align === "right" ? v.padStart(widths[i] ?? 0) : v.padEnd(widths[i] ?? 0)))
      .join("  ")
      .trimEnd();
  return [line(columns.map((c) => c.title)), ...cells.map(line)].join("\n");
}

/** Label/value pairs, labels aligned. */
export function pairs(entries: readonly [string, string | number | null | undefined][], indent = "  "): string {
  const width = Math.max(...entries.map(([label]) => label.length));
  return entries.map(([label, value]) => `${indent}${label.padEnd(width)}  ${text(value)}`).join("\n");
}

function text(value: string | number | null | undefined): string {
  if (value === null || value === undefined || value === "") return "-";
  return String(value).replace(/\s+/g, " ");
}

function clip(value: string, max: number | undefined): string {
  if (max === undefined || value.length <= max) return value;
  return `${value.slice(0, Math.max(1, max - 1))}…`;
}

/** "2026-11-30 12:00:00" from an ISO string (UTC). */
export function when(iso: string | null | undefined): string {
  if (!iso) return "-";
  return iso.replace("T", " ").replace(/\.\d+Z$|Z$/, "");
}

export function age(seconds: number | null | undefined): string {
  if (seconds === null || seconds === undefined) return "-";
  if (seconds < 120) return `${seconds} s`;
  if (seconds < 2 * 3600) return `${Math.floor(seconds / 60)} min ${seconds % 60} s`;
  if (seconds < 2 * 86_400) return `${Math.floor(seconds / 3600)} h ${Math.floor((seconds % 3600) / 60)} min`;
  return `${Math.floor(seconds / 86_400)} d ${Math.floor((seconds % 86_400) / 3600)} h`;
}

export function percent(ratio: number | null | undefined): string {
  if (ratio === null || ratio === undefined) return "-";
  return `${(Math.round(ratio * 1000) / 10).toFixed(1)} %`;
}

export function windowName(seconds: number): string {
  if (seconds % 3600 === 0) return `${seconds / 3600} h`;
  if (seconds % 60 === 0) return `${seconds / 60} min`;
  return `${seconds} s`;
}

export function bytes(n: number | null | undefined): string {
  if (n === null || n === undefined) return "-";
  if (n < 1024) return `${n} B`;
  if (n < 1024 * 1024) return `${(n / 1024).toFixed(1)} KiB`;
  return `${(n / 1024 / 1024).toFixed(1)} MiB`;
}
