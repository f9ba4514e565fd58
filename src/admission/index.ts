// Resource admission: pure functions from a task and a worker view to a decision.
export {
  Reason,
  V1_ORDER,
  V1_REASON_OF,
  REASON_ORDER,
  isReasonCode,
  v1ReasonOf,
  orderReasons,
  firstV1Reason,
  type ReasonCode,
  type V1Reason,
} from "./reasons.ts";
export { zero, clone, normalise, normaliseTypes, wholeUnits, add, sum, sub, type Vector } from "./vector.ts";
export {
  defaultCapacityFromHost,
  overlayCapacity,
  parseCapacity,
  CapacityError,
  effectiveCapacity,
  type HostResources,
  type CapacitySource,
  type EffectiveCapacity,
} from "./capacity.ts";
export {
  taskView,
  leaseView,
  asLease,
  leasesOn,
  sameLeases,
  workerView,
  concurrencySettings,
  type ConcurrencySettings,
  reservedOf,
  exclusiveActive,
  concurrencyOf,
  declaredSeconds,
  type Nominee,
  type Placement,
  type TaskView,
  type LeaseView,
  type WorkerView,
  type WorkerViewOptions,
  type QueuesView,
  type Concurrency,
} from "./view.ts";
export {
  CHECKS,
  isSetShortfall,
  type Check,
  type CheckName,
  type Failure,
  type FailureField,
  type Shortfall,
  type SetShortfall,
} from "./checks.ts";
export { admit, admits, acceptsAny, admitAll, type Decision, type AdmissionObject, type Shortfalls } from "./decide.ts";
export { describeFailure, explainWorker, explainTask, summarize, type Summary } from "./explain.ts";
export {
  INVARIANT_CHECKS,
  allocationOf,
  sameAllocation,
  leaseViolations,
  allocationQueue,
  queueViolations,
  usageOf,
  type Allocation,
  type GuardCause,
} from "./guard.ts";
export {
  DEFAULT_QUEUE,
  queueName,
  QueueBook,
  queueLimits,
  demandOf,
  describeQueueShortfall,
  type Amounts,
  type QueueLimits,
  type QueueShortfall,
} from "./queues.ts";
