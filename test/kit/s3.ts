// A real S3-compatible server for tests: s3rver (npm) on a free loopback port with a temp
// directory, and an independent client to read objects back. s3rver accepts the SDK's default
// checksum headers (x-amz-checksum-*) that R2, MinIO and B2 refuse, so it proves nothing about
// them: workers/exports/destinations.int.test.ts records the requests to check none is sent.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { GetObjectCommand, ListObjectsV2Command, S3Client } from '@aws-sdk/client-s3';
import S3rver from 's3rver';
import { freePort } from '../../deploy/local/ports.js';

export interface S3Handle extends AsyncDisposable {
  endpoint: string;
  accessKeyId: string;
  secretAccessKey: string;
  /** Keys under `prefix`, sorted. */
  list(bucket: string, prefix?: string): Promise<string[]>;
  get(bucket: string, key: string): Promise<Buffer>;
  stop(): Promise<void>;
}

export async function startS3(buckets: string[]): Promise<S3Handle> {
  const dir = mkdtempSync(join(tmpdir(), 'spate-s3-'));
  const port = await freePort();
  const server = new S3rver({
    address: '127.0.0.1',
    port,
    silent: true,
    directory: dir,
    configureBuckets: buckets.map((name) => ({ name, configs: [] })),
  });
  await server.run();
  const endpoint = `http://127.0.0.1:${port}`;
  const client = new S3Client({
    region: 'us-east-1',
    endpoint,
    forcePathStyle: true,
    credentials: { accessKeyId: 'S3RVER', secretAccessKey: 'S3RVER' },
    requestChecksumCalculation: 'WHEN_REQUIRED',
    responseChecksumValidation: 'WHEN_REQUIRED',
  });
  const stop = async () => {
    client.destroy();
    await server.close().catch(() => undefined);
    rmSync(dir, { recursive: true, force: true });
  };
  return {
    endpoint,
    accessKeyId: 'S3RVER',
    secretAccessKey: 'S3RVER',
    async list(bucket, prefix) {
      const keys: string[] = [];
      let token: string | undefined;
      do {
        const page = await client.send(new ListObjectsV2Command({ Bucket: bucket, Prefix: prefix, ContinuationToken: token }));
        for (const o of page.Contents ?? []) if (o.Key) keys.push(o.Key);
        token = page.IsTruncated ? page.NextContinuationToken : undefined;
      } while (token);
      return keys.sort();
    },
    async get(bucket, key) {
      const out = await client.send(new GetObjectCommand({ Bucket: bucket, Key: key }));
      return Buffer.from(await out.Body!.transformToByteArray());
    },
    stop,
    [Symbol.asyncDispose]: stop,
  };
}
