/** A time as the operator API answers it: ISO 8601, or null for none. */
export const iso = (ms: number | null): string | null => (ms === null ? null : new Date(ms).toISOString());
