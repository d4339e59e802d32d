-- Migration number: 0017 	 a follow-up carries its parent's fact
--
-- `ackbox events show <id>` finds an input's rows by its fact (shared/ops/audit.ts: coalesce(fact,
-- receipt_id)), and a follow-up is now written with its parent's fact (shared/outbox/fence.ts). Follow-ups
-- written before had none: those of a fact-keyed input (a message, a mention, a reaction) were hidden from
-- its trail. Each gets its chain's fact here, read from the row its chain started at, whose key is the
-- follow-up's up to the first ">" (a fact-keyed input's key holds no ">"; one keyed by its receipt id has no
-- fact, and its follow-ups are found by that id already).
--
-- Runs once; rows read: the outbox, + 1 per follow-up (the unique index); rows written: each follow-up of a
-- fact-keyed input (the column is in no index).
UPDATE outbox
   SET fact = (SELECT root.fact FROM outbox AS root
                WHERE root.idempotency_key = substr(outbox.idempotency_key, 1, instr(outbox.idempotency_key, '>') - 1))
 WHERE parent_id IS NOT NULL AND fact IS NULL AND instr(idempotency_key, '>') > 0;
