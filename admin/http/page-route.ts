// A route outside the API (no OpenAPI operation, no required scope): the live page and its
// assets and figures. The Fastify adapter (app.ts) registers these too; a handler that needs a
// personal API key authenticates itself, and what it throws answers as any API error does.
export interface PageRequest {
  headers: Readonly<Record<string, string | string[] | undefined>>;
  query: Readonly<Record<string, unknown>>;
}

export interface PageAnswer {
  status: 200;
  contentType: string;
  body: string | Buffer;
  headers?: Readonly<Record<string, string>>;
}

export interface PageRoute {
  path: string;
  handler: (request: PageRequest) => Promise<PageAnswer>;
}
