/** The fault seam's messages, shared by the faulty ingress entry and the chaos checker (kept out of the entry: workerd refuses an entry that exports a non-function). */
export const BEFORE_COMMIT = "D1_ERROR: injected failure before the batch ran";
export const AFTER_COMMIT = "D1_ERROR: injected failure after the batch committed";
