// Shared by the workflows (durable timers) and the activities (in-place polling): the contract's
// floor between two polls of one upstream async request.
export const asyncPollIntervalMs = 5_000;
