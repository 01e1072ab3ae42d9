// Resolves on the first SIGINT or SIGTERM: long-running commands then shut down cleanly.
export function untilSignal(): Promise<void> {
  return new Promise((resolve) => {
    process.once('SIGINT', () => resolve());
    process.once('SIGTERM', () => resolve());
  });
}
