// Types of bin/worker-relaunch.js (plain JavaScript: bin/mirror.js runs it before anything is installed).
export declare const defaultWorkerV8Flags: string;
export declare const defaultApiV8Flags: string;
export interface WorkerProcessSettings {
  nodeArgs: string[];
  env: Record<string, string>;
}
export declare function workerProcessSettings(env?: NodeJS.ProcessEnv): WorkerProcessSettings;
export declare function apiProcessSettings(env?: NodeJS.ProcessEnv): WorkerProcessSettings;
export declare function missingSettings(execArgv?: string[], env?: NodeJS.ProcessEnv, command?: 'worker' | 'api'): WorkerProcessSettings;
