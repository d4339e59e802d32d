import { vi } from "vitest";

/** The Worker's log lines (consoleLog writes one JSON line per call), captured instead of printed; undone by vi.restoreAllMocks(). */
export function captureLog(): string[] {
  const lines: string[] = [];
  const capture = (...args: unknown[]) => {
    lines.push(args.map(String).join(" "));
  };
  for (const method of ["log", "info", "warn", "error", "debug"] as const) vi.spyOn(console, method).mockImplementation(capture);
  return lines;
}
