// Why: benchmark load generators run as child processes (TypeScript through tsx) that talk over IPC.
import { fork, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));

/** Starts bench/lib/<name>.ts with an IPC channel; its output goes to this process's. */
export function startChild(name: string): ChildProcess {
  return fork(path.join(here, `${name}.ts`), [], { execArgv: ['--import', 'tsx'], stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
}

/** The child's next message that `match` accepts; rejects if the child exits first. */
export function nextMessage<T>(child: ChildProcess, match: (m: T) => boolean = () => true): Promise<T> {
  return new Promise((resolve, reject) => {
    const onMessage = (m: T) => {
      if (!match(m)) return;
      child.off('message', onMessage);
      child.off('exit', onExit);
      resolve(m);
    };
    const onExit = (code: number | null) => {
      child.off('message', onMessage);
      reject(new Error(`benchmark child exited (${code}) before answering`));
    };
    child.on('message', onMessage);
    child.once('exit', onExit);
  });
}
