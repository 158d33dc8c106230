/**
 * A Durable Object namespace binding, structurally: the part of Workers'
 * `DurableObjectNamespace` skiplock calls (a stub by name, and its fetch).
 * Structural, so a project's own types from `wrangler types` fit it.
 */
export interface ObjectNamespace<Id = unknown> {
  idFromName(name: string): Id;
  get(id: Id): { fetch(input: string, init?: RequestInit): Promise<Response> };
}
