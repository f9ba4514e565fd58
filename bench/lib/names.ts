// The scenario names, in suite order (kept apart from run.ts so tests can list them
// without starting a run).
export const SCENARIO_NAMES = [
  "lease",
  "lease-warm",
  "claim",
  "dispatch",
  "admission",
  "conditions",
  "coldstart",
  "rss",
  "watch",
  "micro",
] as const;
