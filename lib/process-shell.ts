// The start-up shell every deployable's main.ts runs: --help, configuration, start, signals,
// stop. One shape, so the three processes answer an operator (and a supervisor) the same way.
// Exit codes and log lines are documented in docs/operations.md, "Process lifecycle".
import { Socket } from 'node:net';
import { constants } from 'node:os';
import { ConfigError } from './config.js';
import { createLogger, type Logger } from './logger.js';

/** What a started deployable gives back: an ordered, idempotent stop. */
export interface Running {
  stop(): Promise<void>;
}

export interface StartContext {
  log: Logger;
  /**
   * Registers how to undo something start() opened (a connection, a pool, a listener). If start()
   * throws, the shell runs these in reverse order before exiting; after a successful start they
   * are forgotten (stop() owns everything then).
   */
  onFailedStart: (undo: () => unknown) => void;
}

export interface Deployable<C> {
  /** Logger name: "ingest", "admin", "worker". */
  name: string;
  help(): string;
  loadConfig(env: Readonly<Record<string, string | undefined>>): C;
  start(config: C, context: StartContext): Promise<Running>;
}

/** Exit codes of every deployable (128 + signal number when a signal forced the exit). */
export const EXIT_CODES = {
  /** --help, or stopped cleanly after SIGTERM/SIGINT. */
  ok: 0,
  /** start() failed (what it opened was undone first), or stop() failed. */
  failed: 1,
  /** The configuration is invalid: every problem is printed on stderr. */
  config: 2,
} as const;

/** The signals that ask a deployable to stop. */
const STOP_SIGNALS = ['SIGTERM', 'SIGINT'] as const;

/**
 * A supervisor (the `npm start` launcher) that wants its child to end with it sets this to the
 * number of a file descriptor it keeps the other end of (a pipe it never writes to). Node has no
 * PR_SET_PDEATHSIG; a pipe's end of file arrives however the supervisor dies (kill -9, OOM).
 */
export const LIFELINE_FD_ENV = 'SPATE_LIFELINE_FD';

/** How long stop() may take once the supervisor is gone (it must be over within 5 s of that). */
export const LIFELINE_STOP_MS = 3_000;

/** Calls `onLost` once when the lifeline of LIFELINE_FD_ENV closes; nothing without one. */
function watchLifeline(onLost: () => void): void {
  const fd = Number(process.env[LIFELINE_FD_ENV]);
  if (!Number.isInteger(fd) || fd < 3) return;
  let lost = false;
  const lose = () => {
    if (lost) return;
    lost = true;
    onLost();
  };
  const pipe = new Socket({ fd, readable: true, writable: false });
  pipe.on('data', () => undefined); // nothing is sent; reading is what reveals the end
  pipe.once('end', lose);
  pipe.once('close', lose);
  pipe.once('error', lose);
  pipe.unref(); // it must not keep the process alive on its own
}

/** 128 + the signal's number, as a shell reports a process ended by that signal. */
export function signalExitCode(signal: NodeJS.Signals): number {
  return 128 + (constants.signals[signal] ?? 0);
}

/**
 * Runs `deployable` as this process; resolves once it started. From then on the process ends
 * through the signal handlers: a first SIGTERM/SIGINT calls stop() once and exits with one of
 * EXIT_CODES, a second exits at once; the end of its supervisor's lifeline (LIFELINE_FD_ENV) stops
 * it within LIFELINE_STOP_MS. Every other ending exits here.
 */
export async function runDeployable<C>(deployable: Deployable<C>): Promise<void> {
  if (process.argv.includes('--help') || process.argv.includes('-h')) {
    console.log(deployable.help());
    return process.exit(EXIT_CODES.ok);
  }

  let config: C;
  try {
    config = deployable.loadConfig(process.env);
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err;
    console.error(`${err.message}\n(--help lists every setting)`);
    return process.exit(EXIT_CODES.config);
  }

  const log = createLogger(deployable.name);
  let running: Running | undefined;
  let stopping = false;

  /** The one stop of this process: stop() once, then exit (0, or 1 if it failed). */
  const stopOnce = (app: Running) => {
    stopping = true;
    app.stop().then(
      () => {
        log.info('stopped');
        process.exit(EXIT_CODES.ok);
      },
      (err: unknown) => {
        log.error({ err }, 'stop failed');
        process.exit(EXIT_CODES.failed);
      },
    );
  };

  const onSignal = (signal: NodeJS.Signals) => {
    if (stopping) {
      log.warn({ signal }, 'second signal: exiting without finishing the stop');
      process.exit(signalExitCode(signal));
    }
    // Still starting: nothing has been acknowledged yet, so this is no worse than a crash (which
    // every deployable survives); waiting for a start that may itself wait for NATS is not.
    if (!running) {
      log.warn({ signal }, 'signal while starting: exiting');
      process.exit(signalExitCode(signal));
    }
    log.info({ signal }, 'stopping');
    stopOnce(running);
  };
  for (const signal of STOP_SIGNALS) process.on(signal, onSignal);

  // The supervisor died: stop as for a signal, but within LIFELINE_STOP_MS (NATS and PostgreSQL
  // are going away too, and a stop that waits for them must not keep the process running).
  watchLifeline(() => {
    if (!running) {
      log.warn('supervisor gone while starting: exiting');
      process.exit(EXIT_CODES.failed);
    }
    log.warn('supervisor gone: stopping');
    setTimeout(() => {
      log.warn({ ms: LIFELINE_STOP_MS }, 'stop did not finish in time: exiting');
      process.exit(EXIT_CODES.failed);
    }, LIFELINE_STOP_MS).unref();
    if (!stopping) stopOnce(running);
  });

  const undoSteps: Array<() => unknown> = [];
  try {
    running = await deployable.start(config, { log, onFailedStart: (undo) => undoSteps.push(undo) });
  } catch (err) {
    log.fatal({ err }, 'failed to start');
    for (const undo of undoSteps.reverse()) {
      try {
        await undo();
      } catch (undoErr) {
        log.error({ err: undoErr }, 'undoing a failed start failed');
      }
    }
    return process.exit(EXIT_CODES.failed);
  }
  undoSteps.length = 0;
  log.info('started');
  // A signal during start (the process exited above) cannot get here; later ones go to stop().
}
