// Waiting for a file's stream to take more, without waiting for ever on one that failed.
import type { Writable } from 'node:stream';

/**
 * Resolves when `stream` drains; rejects when it fails or is destroyed first (a failed upload
 * destroys its body), where waiting for 'drain' alone would wait for ever.
 */
export function drained(stream: Writable): Promise<void> {
  if (stream.destroyed) return Promise.reject(stream.errored ?? new Error('the file was closed before it was written'));
  return new Promise((resolve, reject) => {
    const settle = (err?: Error) => {
      stream.off('drain', onDrain).off('error', settle).off('close', onClose);
      if (err) reject(err);
      else resolve();
    };
    const onDrain = () => settle();
    const onClose = () => settle(stream.errored ?? new Error('the file was closed before it was written'));
    stream.on('drain', onDrain).on('error', settle).on('close', onClose);
  });
}
