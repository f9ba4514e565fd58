// The Queues page in a real browser (Debian's chromium through playwright-core) against a
// real Hub on loopback: without Queue objects the page says so and a task's page has no queue
// section; two Queues created through the API appear live; after claims the page shows what
// each Queue's status says (use against quota on one scale, borrowed, pending, admitted,
// share, conditions); a queue's link opens its tasks; a task's page shows its queue standing
// as task-admission reports it, links back to its queue, and names the borrowed leases a
// task within its quota waits on. Screenshots go to test-output/ui/.
import { existsSync, mkdirSync } from "node:fs";
import { rm } from "node:fs/promises";
import { join } from "node:path";
import type { BrowserContext, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { API_PREFIX } from "../../src/api/resources.ts";
import type { Queue } from "../../src/resources/types.ts";
import { eventually, get, post, registerBody, startHub, type TestHub } from "../support/hub.ts";
import { CHROMIUM, launchChromium, uiBuilt } from "../support/browser.ts";

// What the functions handed to page.evaluate use; they run in the page, not in Node.
declare const location: { hash: string };

const ROOT = join(import.meta.dirname, "..", "..");
const OUT = join(ROOT, "test-output", "ui");
const API = "loom.dev/v1alpha1";

let hub: TestHub | undefined;
let ctx: BrowserContext | undefined;
let profile = "";

afterAll(async () => {
  await ctx?.close().catch(() => undefined);
  await hub?.close();
  if (profile) await rm(profile, { recursive: true, force: true });
});

const shot = (page: Page, name: string) => page.screenshot({ path: join(OUT, `${name}.png`), fullPage: true });
const createQueue = (name: string, spec: Record<string, unknown>) =>
  fetch(hub!.url + API_PREFIX + "/queues", {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ apiVersion: API, kind: "Queue", metadata: { name }, spec }),
  }).then((r) => r.status);
const queuesNow = async () => (await get(hub!.url, `${API_PREFIX}/queues`)).body.items as Queue[];

/** What one queue row shows: the bars' numbers by dimension, and the counted fields. */
const rowOf = (page: Page, q: string) =>
  page.locator(`table.queues tr[data-queue="${q}"]`).evaluate((tr) => ({
    dims: Object.fromEntries(
      [...tr.querySelectorAll(".meter")].map((m) => [m.getAttribute("data-dim"), m.querySelector(".num")!.textContent]),
    ),
    fields: Object.fromEntries(
      [...tr.querySelectorAll("[data-field]")].map((f) => [f.getAttribute("data-field"), f.textContent]),
    ),
    conditions: [...tr.querySelectorAll(".badge")].map((b) => b.textContent),
  }));

/** The same, from the Queue object as the API returns it (the dimensions some queue here limits or uses). */
const UNITS: Record<string, string> = { cpu_millis: "m", memory_mb: "Mi" };
function expected(q: Queue) {
  const quota = q.spec?.quota as Record<string, number | undefined>;
  const used = (q.status?.used ?? {}) as Record<string, number | undefined>;
  const st = q.status ?? {};
  return {
    dims: Object.fromEntries(
      Object.entries(UNITS).map(([d, u]) => [
        d,
        `${used[d] ?? 0}${u} / ${quota?.[d] === undefined ? "-" : `${quota[d]}${u}`}`,
      ]),
    ),
    fields: {
      borrowed: st.borrowed ?? "-",
      lent: st.lent ?? "-",
      pending: String(st.pending ?? 0),
      admitted: String(st.admitted ?? 0),
      share: String(st.share ?? 0),
    },
    conditions: (st.conditions ?? []).filter((c) => c.status === "True").map((c) => c.type),
  };
}

describe("the Queues page in chromium", () => {
  beforeAll(async () => {
    if (!existsSync(CHROMIUM))
      throw new Error(`no browser at ${CHROMIUM}: apt-get install -y chromium (.ci/run does this when it is missing)`);
    mkdirSync(OUT, { recursive: true });
    await uiBuilt();
  }, 120_000);

  it("shows each queue's status, opens its tasks, and a task's standing in its queue", async () => {
    // A Hub with one worker (5 CPUs) and tasks naming two queues, but no Queue object yet.
    hub = await startHub({ heartbeatGraceSeconds: 3600 });
    expect(
      (
        await post(
          hub.url,
          "/api/workers/register",
          registerBody("w0", {
            max_concurrency: 10,
            initial_concurrency: 10,
            resource_capacity: { cpu_millis: 5000, memory_mb: 8192, disk_mb: 0, gpu_count: 0 },
          }),
        )
      ).status,
    ).toBe(200);
    const task = (id: string, queue: string) => ({
      task_id: id,
      queue,
      required_capability: "linux",
      execution_profile: { resources: { cpu_millis: 1000, memory_mb: 256 } },
      payload: { runner: "noop" },
    });
    const tasks = [...[0, 1, 2, 3].map((i) => task(`a${i}`, "team-a")), ...[0, 1].map((i) => task(`b${i}`, "team-b"))];
    expect((await post(hub.url, "/api/tasks/dispatch", { schema_version: 1, tasks })).status).toBe(201);

    ({ ctx, profile } = await launchChromium());
    const page = ctx.pages()[0] ?? (await ctx.newPage());
    const pageErrors: string[] = [];
    page.on("pageerror", (e) => pageErrors.push(e.message));
    page.on("console", (m) => {
      if (/Content Security Policy/i.test(m.text())) pageErrors.push(m.text());
    });
    await page.goto(`${hub.url}/ui/#/queues`);
    await page.locator('.live[data-state="live"]').waitFor({ timeout: 20_000 });

    // 1. No Queue objects: the page says so, and a task's page has no queue section.
    await page.getByText("No Queue objects").waitFor();
    expect(await page.locator("table.queues").count()).toBe(0);
    await page.evaluate(() => (location.hash = "#/task/a3"));
    await page.locator("table.plain", { hasText: "Every check on every worker" }).waitFor();
    expect((await get(hub.url, "/api/data/task-admission?task_id=a3")).body.queue).toBeUndefined();
    expect(await page.locator(".queue-standing").innerHTML()).toBe("");
    await page.getByRole("link", { name: "Queues" }).click();
    await page.getByText("No Queue objects").waitFor();
    await shot(page, "q1-no-queues");

    // 2. Two Queues through the API: the page lists them live, with no reload.
    expect(
      await createQueue("team-a", {
        quota: { cpu_millis: 2000, memory_mb: 4096 },
        borrowing_limit: { cpu_millis: 1000 },
        weight: 1,
      }),
    ).toBe(201);
    expect(await createQueue("team-b", { quota: { cpu_millis: 4000 }, weight: 2 })).toBe(201);
    await page.locator('table.queues tr[data-queue="team-b"]').waitFor({ timeout: 10_000 });
    expect(await page.locator("table.queues tbody tr").count()).toBe(2);

    // 3. Claims by fair share: team-b takes both its tasks, team-a its quota and one borrowed CPU.
    const claim = await post(hub.url, "/api/tasks/claim", { worker_id: "w0", limit: 10 });
    expect(claim.body.tasks.map((t: { task_id: string }) => t.task_id).sort()).toEqual(["a0", "a1", "a2", "b0", "b1"]);
    const settled = await eventually(async () => {
      const qs = await queuesNow();
      const a = qs.find((q) => q.metadata.name === "team-a");
      return a?.status?.admitted === 3 &&
        a.status.pending === 1 &&
        qs.find((q) => q.metadata.name === "team-b")?.status?.admitted === 2
        ? qs
        : undefined;
    }, "both Queues' status written after the claim");
    // The page shows what each Queue's status says, and those are the numbers the claim makes.
    for (const q of settled)
      await expect.poll(() => rowOf(page, q.metadata.name), { timeout: 10_000 }).toEqual(expected(q));
    expect(await rowOf(page, "team-a")).toEqual({
      dims: { cpu_millis: "3000m / 2000m", memory_mb: "768Mi / 4096Mi" },
      fields: { borrowed: "cpu_millis=1000", lent: "-", pending: "1", admitted: "3", share: "0.6" },
      conditions: ["Borrowing", "QuotaExhausted"],
    });
    expect((await rowOf(page, "team-b")).fields).toMatchObject({
      borrowed: "-",
      pending: "0",
      admitted: "2",
      share: "0.2",
    });
    // The fair-share sentence is the Hub's own.
    const report = (await get(hub.url, "/api/data/queues")).body as { standing: string };
    await expect
      .poll(() => page.locator("#main .summary").first().textContent(), { timeout: 15_000 })
      .toContain(report.standing);
    // The conditions, with their messages.
    expect(
      await page
        .locator("table.plain", { hasText: "Queue conditions" })
        .locator("tr", { hasText: "Borrowing" })
        .first()
        .textContent(),
    ).toContain("uses cpu_millis=1000 past its quota");

    // 4. One scale per column: team-a's CPU quota (2000) is half of team-b's (4000), the column's
    //    largest, and its borrowing limit (1000) a quarter, drawn after its quota.
    const box = (q: string, sel: string) =>
      page.locator(`table.queues tr[data-queue="${q}"] .meter[data-dim="cpu_millis"] ${sel}`).boundingBox();
    const [aq, ab, bq] = [
      await box("team-a", ".track:not(.borrow)"),
      await box("team-a", ".track.borrow"),
      await box("team-b", ".track"),
    ];
    expect(aq!.x).toBeCloseTo(bq!.x, 0);
    expect(aq!.width / bq!.width).toBeCloseTo(0.5, 1);
    expect(ab!.width / bq!.width).toBeCloseTo(0.25, 1);
    expect(ab!.x).toBeCloseTo(aq!.x + aq!.width, 0);
    await shot(page, "q2-queues");

    // 5. A queue's link opens its tasks: team-a has four.
    await page.locator('table.queues tr[data-queue="team-a"] a.queue-tasks').click();
    await page.waitForURL(/#\/queue\?queue=team-a$/);
    await expect.poll(() => page.locator(".count").textContent()).toBe("4 of 6 tasks");
    expect(await page.locator('select[aria-label="Queue"]').inputValue()).toBe("team-a");
    expect((await page.locator(".vt-spacer .col-name a").allTextContents()).sort()).toEqual(["a0", "a1", "a2", "a3"]);

    // 6. A task's page: its queue standing as task-admission reports it.
    await page.locator(".vt-spacer .col-name a", { hasText: "a3" }).click();
    const adm = (await get(hub.url, "/api/data/task-admission?task_id=a3")).body.queue;
    expect(adm).toMatchObject({
      name: "team-a",
      position: 1,
      quota: [
        { dimension: "cpu_millis", used: 3000, requested: 1000, nominal: 2000, borrowing_limit: 1000 },
        { dimension: "memory_mb", used: 768, requested: 256, nominal: 4096 },
      ],
    });
    const standing = page.locator(".queue-standing");
    await standing.locator('[data-field="position"]').waitFor({ timeout: 10_000 });
    expect(await standing.locator('[data-field="position"]').textContent()).toBe("1 in team-a");
    expect(await standing.locator('[data-field="standing"]').textContent()).toBe(adm.standing);
    const cpuLine = await standing.locator("tr", { hasText: "cpu_millis" }).locator("td").allTextContents();
    const l = adm.quota[0];
    expect(cpuLine).toEqual(["cpu_millis", "3000", "1000", "2000", "1000", String(l.borrowable)]);
    await shot(page, "q3-task-standing");

    // 7. Back to its queue from the task: the Queues page, with team-a marked.
    await standing.locator("a.queue-link").click();
    await page.waitForURL(/#\/queues\?queue=team-a$/);
    await page.locator('table.queues tr[data-queue="team-a"][aria-current="true"]').waitFor();
    expect(await page.locator('table.queues tr[aria-current="true"]').count()).toBe(1);
    // 8. team-b, within its quota, waits on team-a's borrowed lease (reclaim: wait): its task's page names it.
    expect(
      (await post(hub.url, "/api/tasks/dispatch", { schema_version: 1, tasks: [task("b2", "team-b")] })).status,
    ).toBe(201);
    const waits = await eventually(
      async () => (await get(hub!.url, "/api/data/task-admission?task_id=b2")).body.queue?.waits_on_borrowed,
      "b2 to wait on borrowed leases",
    );
    expect(waits).toHaveLength(1);
    const [w] = waits as { worker: string; leases: { task: string; queue: string }[] }[];
    expect(w.worker).toBe("w0");
    expect(w.leases.every((x) => x.queue === "team-a")).toBe(true);
    await page.evaluate(() => (location.hash = "#/task/b2"));
    const waitRow = page
      .locator(".queue-standing table.plain", { hasText: "Borrowed leases it waits on" })
      .locator("tbody tr");
    await expect.poll(() => waitRow.count(), { timeout: 10_000 }).toBe(1);
    expect(await waitRow.locator("td").first().textContent()).toBe("w0");
    expect(await waitRow.locator("a").allTextContents()).toEqual(w.leases.map((x) => x.task));
    expect(await waitRow.locator("td").nth(1).textContent()).toContain("(team-a)");
    await shot(page, "q4-task-waits-on-borrowed");
    expect(pageErrors).toEqual([]);
  }, 120_000);
});
