/**
 * The binding name of a shard's D1 database: "DB" for shard 0 (the binding
 * every deployment has), "DB_<index>" after. Apart from bindings.ts so that
 * the scripts (setup, deploy, the local run), which have no Workers types,
 * name the bindings from the same definition.
 */
export function shardBindingName(index: number): string {
  return index === 0 ? "DB" : `DB_${index}`;
}
