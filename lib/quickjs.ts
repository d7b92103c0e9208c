// The QuickJS engine (quickjs-emscripten, WebAssembly) that plugin code runs in: the admin server
// compiles saved sources with it (syntax as the workers will see it), the plugin runtime runs each
// plugin instance in an engine of its own. Loaded on first use only: ingest nodes import lib/ and
// never pay for it.
import type * as Core from 'quickjs-emscripten-core';

/** Node has WebAssembly; this project's TypeScript libraries (no DOM) do not declare it. */
type WasmModule = object;
const wasmApi = (globalThis as unknown as { WebAssembly: { compile(bytes: Uint8Array): Promise<WasmModule> } }).WebAssembly;

interface Engine {
  core: typeof Core;
  variant: Core.QuickJSSyncVariant;
  wasm: WasmModule;
}

let compiled: Promise<Engine> | undefined;

async function compileOnce(): Promise<Engine> {
  const core = await import('quickjs-emscripten-core');
  // The package's ESM entry exports the variant as default; its typings describe the CommonJS one.
  const imported: unknown = (await import('@jitl/quickjs-wasmfile-release-sync')).default;
  const variant = ((imported as { default?: unknown }).default ?? imported) as Core.QuickJSSyncVariant;
  // Compile the WebAssembly once per process; every engine below only instantiates it (~1 ms
  // instead of ~25 ms).
  const { readFile } = await import('node:fs/promises');
  const { createRequire } = await import('node:module');
  const wasmPath = createRequire(import.meta.url).resolve('@jitl/quickjs-wasmfile-release-sync/wasm');
  const wasm = await wasmApi.compile(await readFile(wasmPath));
  return { core, variant, wasm };
}

/**
 * A new QuickJS engine: its own WebAssembly instance and linear memory, so what one plugin grows
 * (WebAssembly memory never shrinks) or breaks (an engine abort) is gone with its instance.
 */
export async function newQuickJS(): Promise<Core.QuickJSWASMModule> {
  const engine = (compiled ??= compileOnce());
  const { core, variant, wasm } = await engine.catch((err: unknown) => {
    compiled = undefined;
    throw err;
  });
  return core.newQuickJSWASMModuleFromVariant(core.newVariant(variant, { wasmModule: wasm }));
}

let shared: Promise<Core.QuickJSWASMModule> | undefined;

/** One engine per process for short, trusted work (compiling a source to check its syntax). */
export function sharedQuickJS(): Promise<Core.QuickJSWASMModule> {
  shared ??= newQuickJS().catch((err: unknown) => {
    shared = undefined;
    throw err;
  });
  return shared;
}
