// Bench-only stand-in for shared/slack/signature.ts (ack profiling): the
// header checks run, the HMAC does not. Attribution only: never a proposal.
export { checkSignatureHeaders, MAX_SKEW_SECONDS, signatureFor } from "../../../shared/slack/signature.ts";

export async function verifySignature() {
  return { ok: true };
}
