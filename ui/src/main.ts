// The Loom web view: a header with navigation and the live state of the watches, one view
// at a time (workers, queue, campaigns, queues, a task), chosen by the location hash. The token form
// appears only when the Hub asks for a token.
import { json, token, Unauthorized } from "./auth.ts";
import { h } from "./dom.ts";
import { Fleet, type KindName } from "./fleet.ts";
import { CampaignsView } from "./views/campaigns.ts";
import { QueueView } from "./views/queue.ts";
import { QueuesView } from "./views/queues.ts";
import { TaskView } from "./views/task.ts";
import { WorkersView } from "./views/workers.ts";
import "./style.css";

type View = { el: HTMLElement; update(): void; dispose?(): void };

const app = document.getElementById("app")!;
const main = h("main", { id: "main", tabindex: -1 });
const live = h("p", { class: "live", role: "status", "aria-live": "polite" });
const nav = h("nav", { "aria-label": "Views" });
const signOut = h(
  "button",
  {
    type: "button",
    class: "quiet",
    hidden: true,
    onclick: () => {
      token.clear();
      location.reload();
    },
  },
  "Forget token",
);
let fleet: Fleet | undefined;
let view: View | undefined;

const ROUTES: [string, string][] = [
  ["workers", "Workers"],
  ["queue", "Queue"],
  ["campaigns", "Campaigns"],
  ["queues", "Queues"],
];

function route(): void {
  if (!fleet) return;
  const [path, query] = location.hash.replace(/^#\/?/, "").split("?");
  const params = new URLSearchParams(query ?? "");
  const [top, ...rest] = path.split("/");
  view?.dispose?.();
  const f = fleet;
  if (top === "task" && rest.length) view = new TaskView(f, decodeURIComponent(rest.join("/")));
  else if (top === "queue")
    view = new QueueView(f, params, (name) => (location.hash = `#/task/${encodeURIComponent(name)}`));
  else if (top === "campaigns") view = new CampaignsView(f);
  else if (top === "queues") view = new QueuesView(params.get("queue") ?? "");
  else view = new WorkersView(f, (name) => (location.hash = `#/queue?worker=${encodeURIComponent(name)}`));
  const current = top === "task" ? "queue" : ROUTES.some(([r]) => r === top) ? top : "workers";
  nav.replaceChildren(
    ...ROUTES.map(([r, text]) => h("a", { href: `#/${r}`, "aria-current": r === current ? "page" : undefined }, text)),
  );
  main.replaceChildren(view.el);
  view.update();
  document.title = `Loom · ${top === "task" ? decodeURIComponent(rest.join("/")) : ROUTES.find(([r]) => r === current)![1]}`;
}

function renderLive(f: Fleet): void {
  const kinds: KindName[] = ["workers", "tasks", "campaigns"];
  const phases = kinds.map((k) => f.phases[k]);
  const all = phases.every((p) => p.phase === "watching");
  const trouble = kinds.map((k, i) => [k, phases[i]] as const).filter(([, p]) => p.phase !== "watching");
  live.dataset.state = all ? "live" : trouble.some(([, p]) => p.phase === "retrying") ? "reconnecting" : "syncing";
  live.textContent = all
    ? `● Live: ${f.workers.size} workers, ${f.tasks.size} tasks`
    : `○ ${trouble.map(([k, p]) => `${k} ${p.phase}${p.detail ? ` (${p.detail})` : ""}`).join("; ")}`;
}

function askForToken(message: string): void {
  fleet?.stop();
  fleet = undefined;
  view?.dispose?.();
  view = undefined;
  const input = h("input", {
    id: "token",
    type: "password",
    autocomplete: "off",
    spellcheck: "false",
    required: true,
    "aria-describedby": "token-help",
  });
  const form = h(
    "form",
    { class: "token-form", "aria-labelledby": "token-h" },
    h("h1", { id: "token-h" }, "Connect to the Hub"),
    message ? h("p", { class: "error", role: "alert" }, message) : null,
    h("label", { for: "token" }, "Hub token"),
    input,
    h(
      "p",
      { id: "token-help", class: "help" },
      "The token stays in this tab's session storage and is sent only as a bearer header.",
    ),
    h("button", { type: "submit" }, "Connect"),
  );
  form.addEventListener("submit", (e) => {
    e.preventDefault();
    const t = input.value.trim();
    if (!t) return;
    token.set(t);
    void start();
  });
  main.replaceChildren(form);
  input.focus();
}

async function start(): Promise<void> {
  // One cheap authenticated call first: a wrong token is reported on the form, not as three failing watches.
  try {
    await json("/api/data/task-counts");
  } catch (e) {
    if (e instanceof Unauthorized) return askForToken(token.get() ? "The Hub did not accept this token." : "");
    live.textContent = `○ Hub unreachable: ${(e as Error).message}`;
  }
  signOut.hidden = !token.get();
  const f = new Fleet(() => askForToken("The Hub no longer accepts this token."));
  fleet = f;
  f.subscribe(() => {
    renderLive(f);
    view?.update();
  });
  f.start();
  route();
}

// A skip link that focuses the content without touching the hash (the hash is the route).
const skip = h(
  "a",
  {
    class: "skip",
    href: "#",
    onclick: (e: Event) => {
      e.preventDefault();
      main.focus();
    },
  },
  "Skip to content",
);
app.replaceChildren(
  skip,
  h("header", { class: "top" }, h("a", { class: "brand", href: "#/workers" }, "Loom"), nav, live, signOut),
  main,
);
addEventListener("hashchange", () => {
  route();
  main.focus({ preventScroll: true });
});
void start();
