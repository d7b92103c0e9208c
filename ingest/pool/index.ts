// The parse pool, event-loop side: which bodies are parsed inline and which in a piscina
// thread (parse-thread.ts is the thread's entry; parse-task.ts what both sides share).
export { ParsePool, type ParsePoolOptions } from './parse-pool.js';
