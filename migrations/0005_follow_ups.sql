-- Migration number: 0005 	 follow-ups: a row an effect asked for, recorded with its parent's completion
--
-- An effect may return further intents (shared/app/effects.ts). They are
-- inserted in the same fenced batch as the parent's completion
-- (shared/outbox/fence.ts), so a rejected or lost completion records none of
-- them, and their idempotency keys derive from the parent's
-- ("<parent key>><child key>"), so a repeated effect records them once.
--
-- parent_id: the row whose effect asked for this one (NULL for a row the
-- ingress recorded). Operators read it (`ackbox events show` lists children
-- under their parent); no index: the audit reads one receipt's rows, which
-- it finds by receipt_id already.
-- depth: 0 for a row the ingress recorded, parent's + 1 for a follow-up. The
-- consumer refuses follow-ups past MAX_FOLLOW_UP_DEPTH (shared/outbox/model.ts)
-- so a chain that asks for itself cannot loop forever.
--
-- Neither column is indexed, so an insert still writes 3 rows.
ALTER TABLE outbox ADD COLUMN parent_id INTEGER;
ALTER TABLE outbox ADD COLUMN depth INTEGER NOT NULL DEFAULT 0 CHECK (depth >= 0);
