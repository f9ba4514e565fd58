// Task and package ids, exactly as v1 builds them (RUNNER_PROTOCOL §5), so a task
// dispatched by Loom and one dispatched by a v1 tool get the same id.

/** Each run of characters outside [A-Za-z0-9_.-] becomes "-"; "-" is trimmed at both ends; empty becomes "unknown". */
export function slug(s: unknown): string {
  const out = String(s ?? "")
    .replace(/[^A-Za-z0-9_.-]+/g, "-")
    .replace(/^-+|-+$/g, "");
  return out === "" ? "unknown" : out;
}

/** `{campaign}__{case}__{setting}__run-{run}`, each part slugged. */
export function taskId(campaign: unknown, caseId: unknown, setting: unknown, run: unknown): string {
  return `${slug(campaign)}__${slug(caseId)}__${slug(setting)}__run-${slug(run)}`;
}

/** A case's own `task_id` wins (slugged); otherwise the id is built from its parts. */
export function caseTaskId(
  campaign: unknown,
  c: { task_id?: unknown; case_id?: unknown; setting_id?: unknown; run_id?: unknown },
): string {
  if (c.task_id !== undefined && c.task_id !== null && c.task_id !== "") return slug(c.task_id);
  return taskId(campaign, c.case_id, c.setting_id, c.run_id);
}

/** The default package id of a case: slug(`${campaign}-${setting}`). */
export function packageId(campaign: unknown, setting: unknown): string {
  return slug(`${campaign}-${setting}`);
}
