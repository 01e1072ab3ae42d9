// The scenarios of `npm run bench`, in the order they run: first those of the main setup (in one
// set-up, the full sync of [2] read by the ones after it), then those with set-ups of their own.
// A new scenario is one module beside these, added here.
import { dayOfChangesScenario } from './day-of-changes.ts';
import { fairnessScenario } from './fairness.ts';
import { filtersAggregatesScenario } from './filters-aggregates.ts';
import { fullSync } from './full-sync.ts';
import { ingestCeilingScenario } from './ingest-ceiling.ts';
import { manyProjectsScenario } from './many-projects.ts';
import { rateLimitedScenario } from './rate-limited.ts';
import { readApiBlocks } from './read-api-blocks.ts';
import { readApiScenario } from './read-api.ts';
import { readReplicasScenario } from './read-replicas.ts';
import { sandboxPageServing } from './sandbox-pages.ts';
import { scaleCurve } from './scale-curve.ts';
import type { Scenario } from './scenario.ts';
import { sharedBudgetScenario } from './shared-budget.ts';
import { unchangedPass } from './unchanged-pass.ts';
import { webhookLatencyScenario } from './webhook-latency.ts';

export const scenarios: readonly Scenario[] = [
  sandboxPageServing,
  ingestCeilingScenario,
  fullSync,
  unchangedPass,
  readApiScenario,
  readApiBlocks,
  filtersAggregatesScenario,
  webhookLatencyScenario,
  rateLimitedScenario,
  sharedBudgetScenario,
  manyProjectsScenario,
  dayOfChangesScenario,
  scaleCurve,
  fairnessScenario,
  readReplicasScenario,
];
