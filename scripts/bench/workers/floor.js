/**
 * The runtime's floor: reads the POST body and answers 200. No signature
 * check, no storage. Whatever this costs, every other variant pays too.
 */
export default {
  async fetch(request) {
    await request.arrayBuffer();
    return new Response(null, { status: 200 });
  },
};
