// One task: spec and status, conditions, the per-worker admission table (the same
// /api/data/task-admission that `loom describe` prints), attempts with their admission
// snapshots, Events (watched), the result and its logs. It refetches when the watch reports
// a change to the task (or to a worker, for the admission table), never on a timer.
import { json, request } from "../auth.ts";
import type { QueueExplanation } from "../../../src/resources/queue-explanation.ts";
import type { TaskAdmission, WorkerAdmission, Shortfall } from "../../../src/protocol/types.gen.ts";
import { h } from "../dom.ts";
import { API, type Fleet } from "../fleet.ts";
import { ListWatch } from "../list-watch.ts";
import { DIMENSIONS, requestText, type Task, type Vec } from "../model.ts";
import { ago, badge, STATE_CLASS, table } from "../widgets.ts";
import { span } from "../charts.ts";
import { humanDuration } from "../../../src/resources/jsonpath.ts";
import { isFinal } from "../../../src/resources/types.ts";
import { grantedAdmission, type AdmissionObject } from "../../../src/admission/snapshot.ts";
import { taskSegments, type NotAdmittedEvent, type Segment } from "../../../src/observability/history.ts";

type EventObj = {
  metadata: { name: string; creationTimestamp?: string };
  type?: string;
  reason?: string;
  message?: string;
  count?: number;
  firstTimestamp?: string;
  lastTimestamp?: string;
  source?: { component?: string };
};
type Logs = {
  result_id: string;
  verdict: string | null;
  files: string[];
  logs: { name: string; bytes: number; truncated: boolean; text: string }[];
};

const dl = (pairs: [string, Node | string | number | undefined][]) =>
  h(
    "dl",
    { class: "kv" },
    pairs
      .filter(([, v]) => v !== undefined && v !== "")
      .flatMap(([k, v]) => [h("dt", {}, k), h("dd", {}, typeof v === "number" ? String(v) : v!)]),
  );

/** `memory_mb: requested 65536, capacity 6144, reserved 0, short 59392` for every short dimension. */
export function shortfallText(s: Record<string, Shortfall> | undefined): string {
  return Object.entries(s ?? {})
    .map(([field, x]) =>
      Array.isArray(x.requested)
        ? `${field}: needs ${x.requested.join("|")}, has ${(x.available ?? []).join("|") || "none"}`
        : `${field}: requested ${x.requested}, capacity ${x.capacity}, reserved ${x.reserved}, short ${x.short}`,
    )
    .join("; ");
}

const vec = (v: unknown) => requestText(v as Vec | undefined);

export class TaskView {
  readonly el: HTMLElement;
  private readonly body = h("div", { class: "task-body" });
  private readonly admission = h("div", { "aria-live": "polite" });
  /** Empty (no heading either) while the Hub has no Queue objects. */
  private readonly queueEl = h("div", { class: "queue-standing" });
  private readonly events = new Map<string, EventObj>();
  private readonly eventsEl = h("div");
  private readonly timeEl = h("div", { class: "time-went" });
  private task: Task | undefined;
  private readonly resultEl = h("div");
  private readonly eventWatch: ListWatch<EventObj>;
  private taskVersion = "";
  private workersVersion = -1;
  private resultId = "";
  private stopped = false;

  constructor(
    private readonly fleet: Fleet,
    private readonly name: string,
  ) {
    this.el = h(
      "section",
      { class: "view", "aria-labelledby": "task-h" },
      h("p", {}, h("a", { href: "#/queue" }, "← Queue")),
      h("h1", { id: "task-h" }, name),
      h("h2", {}, "Where the time went"),
      this.timeEl,
      this.body,
      h("h2", {}, "Admission"),
      this.admission,
      this.queueEl,
      h("h2", {}, "Events"),
      this.eventsEl,
      h("h2", {}, "Result and logs"),
      this.resultEl,
    );
    const selector = encodeURIComponent(`involvedObject.kind=Task,involvedObject.name=${name}`);
    this.eventWatch = new ListWatch<EventObj>({
      path: `${API}/events?fieldSelector=${selector}`,
      request: (p, init) => request(p, init),
      onReset: (items) => {
        this.events.clear();
        for (const e of items) this.events.set(e.metadata.name, e);
        this.renderEvents();
      },
      onChange: (type, e) => {
        if (type === "DELETED") this.events.delete(e.metadata.name);
        else this.events.set(e.metadata.name, e);
        this.renderEvents();
      },
    });
    this.eventWatch.start();
  }

  dispose(): void {
    this.stopped = true;
    this.eventWatch.stop();
  }

  update(): void {
    const row = this.fleet.tasks.get(this.name);
    const tv = row?.resourceVersion ?? "gone";
    if (tv !== this.taskVersion) {
      this.taskVersion = tv;
      void this.loadTask();
    }
    if (this.fleet.versions.workers !== this.workersVersion) {
      this.workersVersion = this.fleet.versions.workers;
      void this.loadAdmission();
    }
  }

  private async loadTask(): Promise<void> {
    let t: Task;
    try {
      t = await json<Task>(`${API}/tasks/${encodeURIComponent(this.name)}`);
    } catch (e) {
      if (!this.stopped)
        this.body.replaceChildren(
          h("p", { class: "error", role: "alert" }, `Could not load the task: ${(e as Error).message}`),
        );
      return;
    }
    if (this.stopped) return;
    this.task = t;
    this.renderTime();
    void this.loadAdmission();
    const s = t.spec;
    const st = t.status ?? {};
    const payload = (s.payload ?? {}) as { runner?: string; command?: string };
    const lease = st.lease;
    this.body.replaceChildren(
      h(
        "div",
        { class: "cols" },
        h(
          "div",
          {},
          h("h2", {}, "Spec"),
          dl([
            ["Campaign", s.campaign_id],
            ["Case", s.case_id],
            ["Setting", s.setting_id],
            ["Run", s.run_id],
            ["Required capability", s.required_capability || "any"],
            ["Priority", s.priority ?? 0],
            ["Placement", s.execution_profile?.placement ?? "shared"],
            ["Requests", vec(s.execution_profile?.resources)],
            ["Runner", payload.runner],
            ["Command", payload.command ? h("code", {}, payload.command) : undefined],
            [
              "Labels",
              Object.entries(t.metadata.labels ?? {})
                .map(([k, v]) => `${k}=${v}`)
                .join(", "),
            ],
          ]),
        ),
        h(
          "div",
          {},
          h("h2", {}, "Status"),
          dl([
            ["State", badge(st.state ?? "queued")],
            ["Attempt", st.attempt],
            ["Lease", lease ? `${lease.worker}, epoch ${lease.epoch}, until ${lease.lease_until}` : "none"],
            ["Reservation", lease ? vec(lease.reservation) : undefined],
            ["Excluded workers", st.excluded_workers?.join(", ")],
            ["Issues", st.issues?.join(", ")],
            ["Error", st.error ? h("code", {}, JSON.stringify(st.error)) : undefined],
            ["Finished", st.finished_at ? ago(st.finished_at) : undefined],
          ]),
        ),
      ),
      h("h2", {}, "Conditions"),
      table(
        "Conditions",
        ["Type", "Status", "Reason", "Message", "Since"],
        (st.conditions ?? []).map((c) => [
          c.type,
          c.status,
          c.reason ?? "—",
          c.message ?? "—",
          ago(c.lastTransitionTime),
        ]),
      ),
      h("h2", {}, "Attempts"),
      table(
        "Attempts with the admission snapshot taken at each lease",
        ["Attempt", "Worker", "Outcome", "Reason", "Ended", "Requested", "Reserved before", "Available before"],
        (st.attempts ?? []).map((a) => {
          const adm: Partial<AdmissionObject> = grantedAdmission(a) ?? {};
          return [
            String(a.attempt ?? "—"),
            a.worker ?? "—",
            a.outcome ?? "—",
            a.reason ?? "—",
            ago(a.ended_at),
            vec(adm.requested),
            vec(adm.reserved_before),
            vec(adm.available_before),
          ];
        }),
        "none yet",
      ),
    );
    this.renderResult(st.result?.result_id, st.result);
  }

  private async loadAdmission(): Promise<void> {
    let a: TaskAdmission;
    try {
      a = await json<TaskAdmission>(`/api/data/task-admission?task_id=${encodeURIComponent(this.name)}`);
    } catch (e) {
      if (!this.stopped)
        this.admission.replaceChildren(h("p", { class: "error" }, `Admission unavailable: ${(e as Error).message}`));
      return;
    }
    if (this.stopped) return;
    this.queueEl.replaceChildren(...(a.queue ? queueStanding(a.queue) : []));
    const reasons = (w: WorkerAdmission) => (w.reasons?.length ? w.reasons.join(", ") : (w.reason ?? "—"));
    this.admission.replaceChildren(
      h("p", { class: "summary" }, a.unsatisfiable ? badge("unsatisfiable") : null, " ", a.summary ?? ""),
      table(
        "Every check on every worker",
        ["Worker", "Fits", "Reasons", "Concurrency", ...DIMENSIONS.map((d) => d.label), "Explanation"],
        a.workers.map((w) => [
          w.worker_id,
          w.ok ? "yes" : "no",
          reasons(w),
          w.concurrency ? `${w.concurrency.active_count ?? "?"} / ${w.concurrency.effective_limit ?? "?"}` : "—",
          ...DIMENSIONS.map((d) => {
            const x = w.shortfalls?.[d.field];
            return x
              ? h(
                  "span",
                  { class: "short", "data-dim": d.field },
                  `short ${x.short}${d.unit}: requested ${x.requested}, capacity ${x.capacity}, reserved ${x.reserved}`,
                )
              : "fits";
          }),
          w.explanation ?? shortfallText(w.shortfalls),
        ]),
      ),
    );
  }

  private renderEvents(): void {
    const at = (e: EventObj) => e.lastTimestamp ?? e.firstTimestamp ?? e.metadata.creationTimestamp ?? "";
    const list = [...this.events.values()].sort((a, b) => at(a).localeCompare(at(b)));
    this.renderTime();
    this.eventsEl.replaceChildren(
      table(
        "Events",
        ["Type", "Reason", "Age", "From", "Message"],
        list.map((e) => [
          e.type ?? "—",
          e.reason ?? "—",
          `${ago(at(e))}${(e.count ?? 1) > 1 ? ` (×${e.count})` : ""}`,
          e.source?.component ?? "—",
          e.message ?? "—",
        ]),
        "none",
      ),
    );
  }

  /** One bar from creation to now (or the end): queued by reason, leased, running, then the final state. */
  private renderTime(): void {
    const t = this.task;
    if (!t) return;
    const state = t.status?.state ?? "queued";
    const end = isFinal(state) && t.status?.finished_at ? Date.parse(t.status.finished_at) : Date.now();
    const notAdmitted = [...this.events.values()].filter(
      (e) => e.reason === "NotAdmitted",
    ) as unknown as NotAdmittedEvent[];
    const segs = taskSegments(t, notAdmitted, end);
    const from = Date.parse(t.metadata.creationTimestamp ?? "") || segs[0]?.start || end;
    const total = Math.max(1, end - from);
    const reasons = [...new Set(segs.flatMap((x) => (x.kind === "queued" ? [x.reason] : [])))];
    const what = (x: Segment) =>
      x.kind === "queued" ? `queued: ${x.reason}` : `${x.kind} on ${x.worker} (attempt ${x.attempt})`;
    const cls = (x: Segment) =>
      x.kind === "queued"
        ? `seg q c${reasons.indexOf(x.reason) % 8}`
        : `seg ${x.kind} st-${STATE_CLASS[x.outcome] ?? "busy"}`;
    const parts = segs.map((x) => {
      const el = h("span", { class: cls(x), title: `${what(x)}\n${span(x.start, x.end)}`, "data-kind": x.kind });
      el.style.width = `${((100 * (x.end - x.start)) / total).toFixed(2)}%`;
      return el;
    });
    // The same stretches added up, in the order they first happened.
    const sums = new Map<string, { label: string; ms: number; cls: string }>();
    for (const x of segs) {
      const key = x.kind === "queued" ? `queued: ${x.reason}` : x.kind;
      const cur = sums.get(key) ?? { label: key, ms: 0, cls: cls(x) };
      cur.ms += x.end - x.start;
      sums.set(key, cur);
    }
    const final = isFinal(state) ? state : undefined;
    this.timeEl.replaceChildren(
      h(
        "div",
        { class: "meter" },
        h(
          "span",
          {
            class: "track stacked timebar",
            role: "img",
            "aria-label": `${[...sums.values()].map((x) => `${x.label} ${humanDuration(x.ms)}`).join(", ")}${final ? `, then ${final}` : ", so far"}`,
          },
          parts,
        ),
        final ? badge(final) : h("span", { class: "num" }, `${state}, ${humanDuration(total)} so far`),
      ),
      h(
        "ul",
        { class: "legend" },
        [...sums.values()].map((x) =>
          h(
            "li",
            { "data-part": x.label },
            h("span", { class: `swatch ${x.cls}`, "aria-hidden": "true" }),
            `${x.label}: ${humanDuration(x.ms)}`,
          ),
        ),
        final ? h("li", {}, `→ ${final} after ${humanDuration(total)}`) : null,
      ),
    );
  }

  private renderResult(
    id: string | undefined,
    r: { verdict?: string; bytes?: number; sha256?: string; uploaded_at?: string } | undefined,
  ): void {
    if (!id) {
      this.resultId = "";
      return void this.resultEl.replaceChildren(h("p", { class: "empty" }, "No result yet."));
    }
    if (id === this.resultId) return;
    this.resultId = id;
    const logs = h("div", {}, h("p", {}, "Loading logs…"));
    const download = h("button", { type: "button", onclick: () => void this.download(id) }, "Download result ZIP");
    this.resultEl.replaceChildren(
      dl([
        ["Result", id],
        ["Verdict", badge(r?.verdict ?? "")],
        ["Size", r?.bytes !== undefined ? `${r.bytes} bytes` : undefined],
        ["SHA-256", r?.sha256 ? h("code", {}, r.sha256) : undefined],
        ["Uploaded", r?.uploaded_at ? ago(r.uploaded_at) : undefined],
      ]),
      download,
      logs,
    );
    json<Logs>(`/api/results/${encodeURIComponent(id)}/logs`).then(
      (l) =>
        logs.replaceChildren(
          ...(l.logs.length
            ? l.logs.map((x) =>
                h(
                  "details",
                  { open: x.text.trim() !== "" },
                  h("summary", {}, `${x.name} (${x.bytes} bytes${x.truncated ? ", last 64 KiB shown" : ""})`),
                  h("pre", { class: "log", tabindex: 0 }, x.text || "(empty)"),
                ),
              )
            : [h("p", { class: "empty" }, "The result holds no logs.")]),
        ),
      (e: Error) => logs.replaceChildren(h("p", { class: "error" }, `Logs unavailable: ${e.message}`)),
    );
  }

  /** The ZIP is fetched with the bearer header and handed over as a blob: the token stays out of every URL. */
  private async download(id: string): Promise<void> {
    const res = await request(`/api/results/${encodeURIComponent(id)}`, { headers: { accept: "application/zip" } });
    if (!res.ok)
      return void this.resultEl.append(h("p", { class: "error", role: "alert" }, `Download failed: ${res.status}`));
    const url = URL.createObjectURL(await res.blob());
    const a = h("a", { href: url, download: `${this.name}__${id}.zip` });
    a.click();
    setTimeout(() => URL.revokeObjectURL(url), 60_000);
  }
}

/** The task's queue as task-admission explains it: its place in it, its usage against quota, fair share, and the borrowed leases it waits on. */
function queueStanding(q: QueueExplanation): HTMLElement[] {
  const link = h("a", { href: `#/queues?queue=${encodeURIComponent(q.name)}`, class: "queue-link" }, q.name);
  return [
    h("h2", { id: "queue-standing-h" }, "Queue"),
    dl([
      ["Queue", h("span", {}, link, q.limited ? "" : " (no Queue object: nothing limits it, weight 1)")],
      [
        "Position",
        q.position === null ? "not queued" : h("span", { "data-field": "position" }, `${q.position} in ${q.name}`),
      ],
      ["Fair share", h("span", { "data-field": "standing" }, q.standing)],
      ["Share", `${q.share} now, ${q.decayed_share} decayed`],
      ["Reclaim", q.reclaim],
    ]),
    table(
      `Usage of ${q.name} against its quota`,
      ["Dimension", "Used", "Requested", "Nominal", "Borrowing limit", "Borrowable"],
      q.quota.map((l) => [
        l.dimension,
        String(l.used),
        String(l.requested),
        String(l.nominal),
        String(l.borrowing_limit),
        String(l.borrowable),
      ]),
      `${q.name} sets no quota`,
    ),
    ...(q.waits_on_borrowed?.length
      ? [
          table(
            "Borrowed leases it waits on (until: when the last should end, by declared run times)",
            ["Worker", "Borrowed leases", "Until"],
            q.waits_on_borrowed.map((w) => [
              w.worker,
              h(
                "span",
                {},
                w.leases.map((l, i) =>
                  h(
                    "span",
                    {},
                    i ? ", " : "",
                    h("a", { href: `#/task/${encodeURIComponent(l.task)}` }, l.task),
                    ` (${l.queue}${l.ends_at ? `, ends ${l.ends_at}` : ""})`,
                  ),
                ),
              ),
              w.until ?? "—",
            ]),
          ),
        ]
      : []),
  ];
}
