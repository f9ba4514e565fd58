// A Task with the given status, for unit tests of status transitions and their validation.
import type { Task, TaskStatus } from "../../src/resources/types.ts";

export const taskWith = (status: TaskStatus): Task => ({
  apiVersion: "loom.dev/v1alpha1",
  kind: "Task",
  metadata: { name: "t", generation: 1 },
  spec: { required_capability: "", payload: {} },
  status,
});
