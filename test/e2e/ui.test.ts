// The web view in a real browser (Debian's chromium through playwright-core) against a real
// Hub with the examples and real `loom runner` processes, token-protected:
//  1. start the Hub; 2. open /ui; 3. enter the token; 4. the worker bars equal
//  /api/data/worker-capacity; 5. a dispatched task appears and changes state live, with no
//  reload; 6. the unsatisfiable task names its dimension and numbers; 7. a worker cordoned
//  through the API turns cordoned on the page. Screenshots go to test-output/ui/.
import { spawn, type ChildProcess } from "node:child_process";
import { existsSync, mkdirSync } from "node:fs";
import { rm } from "node:fs/promises";
import { join } from "node:path";
import type { BrowserContext, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loadPaths } from "../../src/resources/load.ts";
import { eventually, get, post, startHub, type TestHub } from "../support/hub.ts";
import { CHROMIUM, launchChromium, uiBuilt } from "../support/browser.ts";

// What the functions handed to page.evaluate use; they run in the page, not in Node.
declare const document: {
  querySelector(s: string): { querySelector(s: string): { textContent: string | null } | null } | null;
  body: object;
};
declare const sessionStorage: { getItem(k: string): string | null };
declare const localStorage: object;
declare const location: { hash: string };
declare const window: { __sameDocument?: number };
declare class MutationObserver {
  constructor(cb: () => void);
  observe(target: object, options: object): void;
}

const ROOT = join(import.meta.dirname, "..", "..");
const OUT = join(ROOT, "test-output", "ui");
const INVENTORY = join(ROOT, "examples", "inventory.json");
const MANIFEST = join(ROOT, "examples", "loom-resource-admission.manifest.json");
const TOKEN = "ui-e2e-token-4f7d2c9a1b3e";
const auth = { authorization: `Bearer ${TOKEN}` };
const OVERSIZED = "loom-resource-admission__oversized__baseline__run-001";

let hub: TestHub | undefined;
let ctx: BrowserContext | undefined;
let profile = "";
const runners: ChildProcess[] = [];

afterAll(async () => {
  await ctx?.close().catch(() => undefined);
  for (const r of runners) if (r.exitCode === null) r.kill("SIGKILL");
  await hub?.close();
  if (profile) await rm(profile, { recursive: true, force: true });
});

const shot = (page: Page, name: string) => page.screenshot({ path: join(OUT, `${name}.png`), fullPage: true });

/** The visible numbers of every bar of one worker row, as "used / total" text per dimension. */
const barTexts = (page: Page, worker: string) =>
  page.$$eval(`.vt-row[data-key="${worker}"] .meter`, (els) =>
    Object.fromEntries(els.map((e) => [e.getAttribute("data-dim"), e.querySelector(".num")!.textContent])),
  );

const UNITS: Record<string, string> = { cpu_millis: "m", memory_mb: "Mi", disk_mb: "Mi", gpu_count: "" };

/** True when every worker row on the page shows what /api/data/worker-capacity says (reserved, active count, limit), at one moment. */
async function barsMatchApi(page: Page): Promise<{ ok: boolean; reservedSomewhere: boolean; detail: string }> {
  const api = (await get(hub!.url, "/api/data/worker-capacity", auth)).body.workers as {
    worker_id: string;
    capacity: Record<string, number>;
    reserved: Record<string, number>;
    active_count: number;
    effective_limit: number;
  }[];
  let reservedSomewhere = false;
  for (const w of api) {
    const shown = await barTexts(page, w.worker_id);
    const active = `${w.active_count} / ${w.effective_limit}`;
    if (shown.active !== active)
      return {
        ok: false,
        reservedSomewhere,
        detail: `${w.worker_id} active/limit: page ${shown.active}, API ${active}`,
      };
    for (const [dim, unit] of Object.entries(UNITS)) {
      const want = `${w.reserved[dim] ?? 0}${unit} / ${w.capacity[dim] ?? "?"}${unit}`;
      if ((w.reserved[dim] ?? 0) > 0) reservedSomewhere = true;
      if (shown[dim] !== want)
        return { ok: false, reservedSomewhere, detail: `${w.worker_id} ${dim}: page ${shown[dim]}, API ${want}` };
    }
  }
  return { ok: api.length > 0, reservedSomewhere, detail: `${api.length} workers` };
}

describe("web view at /ui in chromium", () => {
  beforeAll(async () => {
    if (!existsSync(CHROMIUM))
      throw new Error(`no browser at ${CHROMIUM}: apt-get install -y chromium (.ci/run does this when it is missing)`);
    mkdirSync(OUT, { recursive: true });
    await uiBuilt();
  }, 120_000);

  it("follows the fleet live: token, bars, a dispatched task, the unsatisfiable task, a cordon", async () => {
    // 1. A token-protected Hub with the examples, and a real Runner per example worker.
    hub = await startHub({
      authTokenEnv: "LOOM_UI_E2E_TOKEN",
      env: { LOOM_UI_E2E_TOKEN: TOKEN },
      gitopsPaths: [INVENTORY, MANIFEST],
    });
    const workers = loadPaths([INVENTORY]).resources.filter((r) => r.kind === "Worker");
    for (const w of workers) {
      const s = w.spec;
      const work = join(hub.dir, "runners", w.metadata.name);
      mkdirSync(work, { recursive: true });
      runners.push(
        spawn(
          process.execPath,
          [
            "bin/loom.mjs",
            "runner",
            "--controller",
            hub.url,
            "--worker-id",
            w.metadata.name,
            "--connection-mode",
            "long-poll",
            "--max-concurrency",
            String(s.max_concurrency),
            "--initial-concurrency",
            String(s.initial_concurrency ?? s.max_concurrency),
            "--work-dir",
            work,
            ...(s.capabilities ?? []).flatMap((c) => ["--capability", c]),
            "--resource-capacity-json",
            JSON.stringify(s.resource_capacity),
          ],
          {
            cwd: ROOT,
            stdio: "ignore",
            env: { ...process.env, LOOM_HUB_TOKEN: TOKEN, LOOM_EXAMPLE_STEP_SECONDS: "0.1" },
          },
        ),
      );
    }

    // 2. Open /ui in a fresh browser profile; the page loads without a token and asks for one.
    ({ ctx, profile } = await launchChromium());
    const page = ctx.pages()[0] ?? (await ctx.newPage());
    const urls: string[] = [];
    const apiCalls: { url: string; auth: string | undefined }[] = [];
    page.on("request", (r) => {
      urls.push(r.url());
      if (!r.url().includes("/ui")) apiCalls.push({ url: r.url(), auth: r.headers().authorization });
    });
    const pageErrors: string[] = [];
    page.on("pageerror", (e) => pageErrors.push(e.message));
    // The page must run under its own Content-Security-Policy without a single violation.
    page.on("console", (m) => {
      if (/Content Security Policy/i.test(m.text())) pageErrors.push(m.text());
    });
    await page.goto(`${hub.url}/ui/`);
    await page.getByLabel("Hub token").waitFor();
    await shot(page, "1-token");

    // 3. Enter the token once; it lives in sessionStorage only.
    const beforeToken = apiCalls.length; // the page's probe without a token, answered 401
    expect(beforeToken).toBeGreaterThan(0);
    await page.getByLabel("Hub token").fill(TOKEN);
    await page.keyboard.press("Enter");
    await page.locator('.live[data-state="live"]').waitFor({ timeout: 20_000 });
    await page.evaluate(() => (window.__sameDocument = 1));
    expect(await page.evaluate(() => sessionStorage.getItem("loom.hub-token"))).toBe(TOKEN);
    expect(await page.evaluate(() => JSON.stringify(localStorage))).not.toContain(TOKEN);

    // 4. The bars show what /api/data/worker-capacity says, once the example campaign has settled.
    await eventually(
      async () => {
        const counts = (await get(hub!.url, "/api/data/task-counts", auth)).body;
        const total = Object.values(counts.by_state ?? {}).reduce((a: number, b) => a + (b as number), 0);
        return counts.by_state?.queued === 1 && counts.by_state?.clean === total - 1;
      },
      "the runnable example tasks to finish",
      60_000,
    );
    await eventually(
      async () => (await barsMatchApi(page)).ok,
      "the worker bars to equal /api/data/worker-capacity",
      15_000,
    );
    const caps = await barTexts(page, "evaluation-01");
    expect(caps.cpu_millis).toBe("0m / 4000m");
    expect(caps.memory_mb).toBe("0Mi / 6144Mi");
    await shot(page, "2-workers");

    // 4b. One scale per column: evaluation-02 offers half of evaluation-01's CPU, so its track is half as long, from the same left edge.
    const track = (w: string, dim: string) =>
      page.locator(`.vt-row[data-key="${w}"] .meter[data-dim="${dim}"] .track`).boundingBox();
    // Both rows drawn (a re-render may be under way when the bars first match the API).
    const [cpu1, cpu2] = await eventually(
      async () => {
        const both = [await track("evaluation-01", "cpu_millis"), await track("evaluation-02", "cpu_millis")];
        return both.every(Boolean) && both;
      },
      "both workers' CPU tracks to be drawn",
      15_000,
    );
    expect(cpu2!.x).toBeCloseTo(cpu1!.x, 0);
    expect(cpu2!.width / cpu1!.width).toBeCloseTo(2000 / 4000, 1);
    // Every bar's numbers are shown whole (the Disk text was clipped).
    expect(
      await page.$$eval(".vt-row .meter .num", (els) =>
        els.filter((e) => e.scrollWidth > e.clientWidth + 1).map((e) => e.textContent),
      ),
    ).toEqual([]);

    // 4c. The timeline draws one bar per lease each worker held, as the tasks' attempts record them.
    const tasksNow = (await get(hub.url, "/apis/loom.dev/v1alpha1/tasks", auth)).body.items as {
      metadata: { name: string };
      status?: { state?: string; lease?: { worker: string }; attempts?: { worker?: string }[] };
    }[];
    const leasesOn = (w: string) =>
      tasksNow.reduce(
        (n, t) =>
          n + (t.status?.attempts ?? []).filter((a) => a.worker === w).length + (t.status?.lease?.worker === w ? 1 : 0),
        0,
      );
    const ranOn = (w: string) =>
      tasksNow.filter((t) => (t.status?.lease?.worker ?? t.status?.attempts?.at(-1)?.worker) === w).length;
    expect(leasesOn("evaluation-01")).toBeGreaterThan(0);
    await expect
      .poll(() => page.locator('.timeline-row[data-worker="evaluation-01"] .tbar').count(), { timeout: 15_000 })
      .toBe(leasesOn("evaluation-01"));
    expect(await page.locator('.timeline-row[data-worker="evaluation-02"] .tbar').count()).toBe(
      leasesOn("evaluation-02"),
    );
    const tip = await page.locator('.timeline-row[data-worker="evaluation-01"] .tbar').first().getAttribute("title");
    expect(tip).toMatch(/\(attempt 1\): clean\n[\s\S]*reserved: cpu \d+m/);

    // 4d. A worker's name opens its tasks: the count is what ran there, the Worker menu shows the filter.
    await page.locator('.vt-row[data-key="evaluation-01"] .col-name a').click();
    await page.waitForURL(/#\/queue\?worker=evaluation-01$/);
    await expect
      .poll(() => page.locator(".count").textContent())
      .toBe(`${ranOn("evaluation-01")} of ${tasksNow.length} tasks`);
    expect(ranOn("evaluation-01")).toBeGreaterThan(0);
    expect(await page.getByLabel("Worker", { exact: true }).inputValue()).toBe("evaluation-01");
    expect(await page.locator(".vt-spacer .col-worker").allTextContents()).toEqual(
      Array(ranOn("evaluation-01")).fill("evaluation-01"),
    );
    // Whole names: long-context and long-context-2 read apart, nothing clamped, the tooltip has the name.
    await page.getByLabel("Worker", { exact: true }).selectOption("");
    // The queued task's position is the Hub's (/api/data/queue-positions), not one of the page's own.
    const positions = (await get(hub.url, "/api/data/queue-positions", auth)).body.positions as Record<string, number>;
    expect(positions[OVERSIZED]).toBe(1);
    await expect
      .poll(() => page.locator(`.vt-row[data-key="${OVERSIZED}"] .col-position`).textContent(), { timeout: 15_000 })
      .toBe(String(positions[OVERSIZED]));
    const names = await page.$$eval(".vt-spacer .col-name a", (els) =>
      els.map((e) => ({
        text: e.textContent,
        title: e.getAttribute("title"),
        clipped: e.scrollHeight > e.clientHeight + 1,
      })),
    );
    expect(names.length).toBe(tasksNow.length);
    for (const n of names) expect(n).toEqual({ text: n.title, title: n.title, clipped: false });
    expect(
      await page.$$eval(".vt-spacer .wrap2", (els) =>
        els.filter((e) => e.scrollHeight > e.clientHeight + 1).map((e) => e.textContent),
      ),
    ).toEqual([]);

    // 4e. The last hour below the queue: the waiting reason now, and every lease granted in the hour.
    const legend = page.locator(".queue-depth .legend li", { hasText: "exceeds_worker_capacity" });
    await expect
      .poll(() => legend.textContent(), { timeout: 15_000 })
      .toMatch(/^exceeds_worker_capacity: now 1, peak /);
    const granted = await page.$$eval(".leases-rate .col", (els) =>
      els.reduce((n, e) => n + Number(e.getAttribute("data-total")), 0),
    );
    expect(granted).toBe(leasesOn("evaluation-01") + leasesOn("evaluation-02"));
    await shot(page, "2b-queue-history");

    // 4f. A finished task's page: where its time went, queued then leased or running, then its final state.
    await page.locator(".vt-spacer .col-name a", { hasText: /__tokenize-a__/ }).click();
    await page.locator(".time-went .timebar .seg").first().waitFor();
    const kinds = await page.$$eval(".time-went .timebar .seg", (els) => els.map((e) => e.getAttribute("data-kind")));
    expect(kinds[0]).toBe("queued");
    expect(kinds).toContain("running");
    expect(await page.locator(".time-went").textContent()).toMatch(/→ clean after /);
    await shot(page, "2c-task-time");
    await page.getByRole("link", { name: "Workers" }).click();
    await page.getByRole("heading", { name: "Workers" }).waitFor();

    // 5. Dispatch a task through the API; on the queue it appears, runs and finishes, with no reload.
    await page.getByRole("link", { name: "Queue", exact: true }).click();
    await page.getByRole("grid", { name: "Tasks" }).waitFor();
    const seen = await page.evaluateHandle(() => {
      const states = new Set<string>();
      new MutationObserver(() => {
        const row = document.querySelector('.vt-row[data-key="ui-e2e-live"]');
        const s = row?.querySelector(".col-state")?.textContent;
        if (s) states.add(s);
      }).observe(document.body, { subtree: true, childList: true, characterData: true });
      return states;
    });
    const d = await post(
      hub.url,
      "/api/tasks/dispatch",
      {
        schema_version: 1,
        tasks: [
          {
            task_id: "ui-e2e-live",
            campaign_id: "ui-e2e",
            priority: 100,
            required_capability: "linux",
            execution_profile: { placement: "shared", resources: { cpu_millis: 1500, memory_mb: 1024 } },
            payload: { runner: "shell", command: "sleep 4; echo done" },
          },
        ],
      },
      auth,
    );
    expect(d.status, JSON.stringify(d.body)).toBeLessThan(300);
    const row = page.locator('.vt-row[data-key="ui-e2e-live"]');
    await row.waitFor({ timeout: 15_000 });
    await row.locator(".col-state", { hasText: "running" }).waitFor({ timeout: 20_000 });
    // While it runs it holds a reservation: the bars still equal the data API, now with load.
    await page.getByRole("link", { name: "Workers" }).click();
    await eventually(
      async () => {
        const m = await barsMatchApi(page);
        return m.ok && m.reservedSomewhere;
      },
      "bars equal to the data API while the task holds a reservation",
      15_000,
    );
    await shot(page, "3-workers-busy");
    if (process.env.LOOM_UI_DOCS_IMAGE) await page.screenshot({ path: join(ROOT, "docs", "ui.png") });
    await page.getByRole("link", { name: "Queue", exact: true }).click();
    await page.locator('.vt-row[data-key="ui-e2e-live"] .col-state', { hasText: "clean" }).waitFor({ timeout: 30_000 });
    const states = await seen.evaluate((s) => [...s]);
    expect(states).toContain("clean");
    expect(states.length).toBeGreaterThan(1); // it changed under our eyes
    expect(await page.evaluate(() => window.__sameDocument)).toBe(1);
    await shot(page, "4-queue");
    // Its page shows the result and the log the Runner uploaded.
    await row.locator("a").click();
    await page.getByRole("heading", { name: "ui-e2e-live" }).waitFor();
    await expect
      .poll(
        () =>
          page
            .locator("details", { hasText: /^stdout\.txt/ })
            .locator("pre.log")
            .textContent(),
        { timeout: 15_000 },
      )
      .toContain("done");
    await page.getByRole("link", { name: "← Queue" }).click();

    // 6. The unsatisfiable example task: by keyboard from the queue, its page names the dimension and the numbers.
    await page.getByLabel("Name contains").fill("oversized");
    await page.locator(`.vt-row[data-key="${OVERSIZED}"]`).waitFor();
    await page.getByRole("grid", { name: "Tasks" }).focus();
    await page.keyboard.press("ArrowDown");
    await page.keyboard.press("Enter");
    await page.getByRole("heading", { name: OVERSIZED }).waitFor();
    const cpu = page.locator("table.plain tr", { hasText: "evaluation-01" }).locator('.short[data-dim="cpu_millis"]');
    await expect
      .poll(() => cpu.textContent(), { timeout: 15_000 })
      .toBe("short 12000m: requested 16000, capacity 4000, reserved 0");
    const mem = page.locator("table.plain tr", { hasText: "evaluation-02" }).locator('.short[data-dim="memory_mb"]');
    expect(await mem.textContent()).toBe("short 63488Mi: requested 65536, capacity 2048, reserved 0");
    expect(await page.locator("table.plain", { hasText: "Unsatisfiable" }).first().textContent()).toContain(
      "exceeds_worker_capacity",
    );
    await shot(page, "5-unsatisfiable-task");

    // 7. Cordon a worker through the API; the workers page follows.
    await page.getByRole("link", { name: "Workers" }).click();
    const state = page.locator('.vt-row[data-key="evaluation-02"] .col-state');
    await expect.poll(() => state.textContent()).toBe("ready");
    expect((await post(hub.url, "/api/admin/block-worker", { worker_id: "evaluation-02" }, auth)).status).toBe(200);
    await expect.poll(() => state.textContent(), { timeout: 15_000 }).toBe("cordoned");
    await shot(page, "6-cordoned");

    // A queue of thousands stays a few dozen rows in the DOM, and the keyboard reaches its end.
    const bulk = Array.from({ length: 2000 }, (_, i) => ({
      task_id: `bulk-${String(i).padStart(4, "0")}`,
      campaign_id: "ui-bulk",
      required_capability: "no-such-capability",
      payload: { runner: "noop" },
    }));
    const t0 = Date.now();
    expect((await post(hub.url, "/api/tasks/dispatch", { schema_version: 1, tasks: bulk }, auth)).status).toBe(201);
    await page.evaluate(() => (location.hash = "#/queue?campaign=ui-bulk"));
    await page.locator(".count", { hasText: /^2000 of \d+ tasks$/ }).waitFor({ timeout: 30_000 });
    console.log(`ui e2e: 2000 dispatched tasks listed on the page ${Date.now() - t0} ms after the dispatch call`);
    const rendered = await page.locator(".vt-spacer > .vt-row").count();
    expect(rendered).toBeGreaterThan(5);
    expect(rendered).toBeLessThan(80);
    await page.getByRole("grid", { name: "Tasks" }).focus();
    await page.keyboard.press("End");
    await page.locator('.vt-row.active[data-key="bulk-1999"]').waitFor();
    expect(await page.locator(".vt-spacer > .vt-row").count()).toBeLessThan(80);
    await shot(page, "7-bulk-queue-end");

    // The token went only in headers: never in a URL, and on every API call.
    expect(urls.filter((u) => u.includes(TOKEN))).toEqual([]);
    expect(apiCalls.slice(0, beforeToken).every((c) => c.auth === undefined)).toBe(true);
    expect(
      apiCalls
        .slice(beforeToken)
        .filter((c) => c.auth !== `Bearer ${TOKEN}`)
        .map((c) => c.url),
    ).toEqual([]);
    // Live by watch, not by polling: each collection was listed once, then only watched.
    const lists = apiCalls.filter(
      (c) =>
        /\/apis\/loom\.dev\/v1alpha1\/(workers|tasks|campaigns)$/.test(new URL(c.url).pathname) &&
        !c.url.includes("watch=1"),
    );
    expect(lists.map((c) => new URL(c.url).pathname).sort()).toEqual([
      "/apis/loom.dev/v1alpha1/campaigns",
      "/apis/loom.dev/v1alpha1/tasks",
      "/apis/loom.dev/v1alpha1/workers",
    ]);
    expect(pageErrors).toEqual([]);
  }, 240_000);
});
