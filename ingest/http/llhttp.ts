// Node's own HTTP/1.1 request parser (llhttp, the one node:http runs on), used without node:http's
// stream machinery: per request that machinery costs ~5 µs of CPU here, llhttp alone ~1 µs
// (measured 2026-11-26 against uWS 20.30: 7.6 / 8.6 / 12.5 µs per trivial request for uWS /
// net + llhttp / node:http). It is reached through `_http_common`, which node:http itself uses;
// the callback slots and their arguments have been stable since Node 12.
import { createRequire } from 'node:module';

export interface LlhttpParser {
  initialize(type: number, resource: object, maxHeaderSize: number, lenient: number): void;
  /** Bytes parsed, or an Error with `code` (HPE_*) when the input is not HTTP/1.x. */
  execute(data: Buffer): number | (Error & { code?: string });
  close(): void;
  [slot: number]: unknown;
}

interface LlhttpBinding {
  new (): LlhttpParser;
  REQUEST: number;
  kOnHeaders: number;
  kOnHeadersComplete: number;
  kOnBody: number;
  kOnMessageComplete: number;
}

const require = createRequire(import.meta.url);
const common = require('_http_common') as { HTTPParser: LlhttpBinding; methods: string[] };

export const HTTPParser = common.HTTPParser;
/** Method names by the index llhttp reports. */
export const METHODS: readonly string[] = common.methods.map((m) => m.toLowerCase());

/** (versionMajor, versionMinor, headers, method, url, statusCode, statusMessage, upgrade, shouldKeepAlive) */
export type HeadersCompleteCallback = (
  versionMajor: number,
  versionMinor: number,
  headers: string[] | undefined,
  method: number,
  url: string | undefined,
  statusCode: unknown,
  statusMessage: unknown,
  upgrade: boolean,
  shouldKeepAlive: boolean,
) => void;
