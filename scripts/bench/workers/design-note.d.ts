/** Types for design-note.js as Node imports it (the schema; the statements run only in the probe). */
export declare const SCHEMA: readonly string[];
