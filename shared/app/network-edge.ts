/**
 * The test kit's network edge (shared/app/testing.ts, shared/app/whole-path.ts): the fetch a kit run builds the
 * engine with — its effect context's `edge` (EffectContext.edge: the Slack client, ctx.fetch, a response_url),
 * or the Workers' `{ edge }` option — answering each request from the fake that serves its origin. Each run
 * builds its own and nothing assigns globalThis.fetch, so runs may overlap and each fake sees its own run's calls
 * only; a host no fake serves never reaches the network.
 *
 * Another kind of fake (a model's endpoint beside Slack and the app's services) is one more FakeHost in a run's
 * list: an origin and what answers it.
 */

/** A fake at the kit's edge: the origin it serves and how it answers a request there. */
export interface FakeHost {
  /** The origin it answers (https://host). */
  readonly origin: string;
  /** @internal the kit's network edge: its answer to one request (a rejection is a connection that failed) */
  readonly handle: (request: Request) => Promise<Response>;
}

/** A fetch that hands each request to the host serving its origin, and any other to `otherwise`. */
export function fakeEdge(hosts: readonly FakeHost[], otherwise: (request: Request) => Promise<Response>): typeof fetch {
  return async (input, init) => {
    const request = new Request(input, init);
    const origin = new URL(request.url).origin;
    const host = hosts.find((candidate) => candidate.origin === origin);
    return host ? host.handle(request) : otherwise(request);
  };
}
