// GitOps: files and folders as the declared state of Workers, Campaigns and Tasks.
export {
  GitopsSync,
  DEFAULT_DEBOUNCE_MS,
  type GitopsSyncOptions,
  type GitopsLog,
  type SyncReport,
  type FileReport,
} from "./sync.ts";
export {
  planApply,
  applyPlan,
  readCurrent,
  planOps,
  countPlan,
  SOURCE_ANNOTATION,
  PRUNED_ANNOTATION,
  GITOPS_KINDS,
  type ApplyOptions,
  type Plan,
  type PlanStep,
  type PlanCounts,
  type ApplyResult,
} from "./apply.ts";
