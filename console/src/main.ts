import { api, ApiError, errorText, forgetKey, getKey, setKey, setUnauthorizedHandler } from "./api";
import { clear, h } from "./dom";
import { alertBox, Scope } from "./ui";
import { sandboxesView } from "./views/sandboxes";
import { sandboxView } from "./views/sandbox";
import { imagesView, imageView } from "./views/images";
import { snapshotsView } from "./views/snapshots";
import { usageView } from "./views/usage";
import { capacityView } from "./views/capacity";
import { keysView } from "./views/keys";

export interface Session {
  admin: boolean;
}

type View = (main: HTMLElement, scope: Scope, session: Session, arg: string) => void;

const ROUTES: { path: string; label: string; view: View; adminOnly?: boolean }[] = [
  { path: "sandboxes", label: "Sandboxes", view: sandboxesView },
  { path: "images", label: "Images", view: imagesView },
  { path: "snapshots", label: "Snapshots and pools", view: snapshotsView },
  { path: "usage", label: "Usage", view: usageView },
  { path: "capacity", label: "Capacity", view: capacityView },
  { path: "keys", label: "Keys", view: keysView, adminOnly: true },
];

const app = document.getElementById("app")!;
let session: Session | null = null;
let scope: Scope | null = null;
let refused: ApiError | null = null;

function route(): { name: string; arg: string } {
  const m = /^#\/([a-z]+)(?:\/([^/?#]+))?/.exec(location.hash);
  return m ? { name: m[1], arg: m[2] ? decodeURIComponent(m[2]) : "" } : { name: "sandboxes", arg: "" };
}

function endScope(): void {
  scope?.dispose();
  scope = null;
}

function signIn(message?: string): void {
  endScope();
  session = null;
  clear(app);
  const input = h("input", { id: "api-key", type: "password", name: "api-key", autocomplete: "off", spellcheck: "false",
    required: true, "aria-describedby": "api-key-hint" });
  const slot = h("div");
  const button = h("button", { type: "submit" }, "Sign in");
  const form = h("form", { class: "signin", "aria-labelledby": "signin-title" },
    h("h1", { id: "signin-title" }, "kiln console"),
    h("div", { class: "field" }, h("label", { for: "api-key" }, "API key"), input,
      h("small", { id: "api-key-hint" }, "Paste a kiln API key. It stays in this tab only (sessionStorage) and is sent as a Bearer token; close the tab to forget it.")),
    button, slot);
  if (message) slot.append(alertBox(message));
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const key = input.value.trim();
    if (!key) return;
    button.disabled = true;
    clear(slot);
    try {
      await start(key);
    } catch (e) {
      clear(slot);
      slot.append(alertBox(refusalText(e), [{ label: "Try again", run: () => form.requestSubmit() }]));
      input.focus();
    } finally {
      button.disabled = false;
    }
  });
  app.append(h("main", { id: "main", class: "signin-page" }, form));
  input.focus();
}

function refusalText(e: unknown): string {
  if (e instanceof ApiError && e.status === 401) {
    return `kilnd refused this API key: it is wrong, revoked or expired (${e.message}). Check the key and sign in again.`;
  }
  return `Could not sign in: ${errorText(e)}`;
}

/** Checks a key (GET /v1/limits answers any valid key; GET /v1/keys says whether it is an admin's). */
async function start(key: string): Promise<void> {
  await api("/v1/limits", { keyOverride: key, quiet401: true });
  let admin = false;
  try {
    await api("/v1/keys", { keyOverride: key, quiet401: true });
    admin = true;
  } catch (e) {
    if (!(e instanceof ApiError && e.status === 403)) throw e;
  }
  setKey(key);
  refused = null;
  session = { admin };
  shell();
}

let main: HTMLElement;
let nav: HTMLElement;

function shell(): void {
  clear(app);
  const links = ROUTES.filter((r) => !r.adminOnly || session!.admin).map((r) =>
    h("li", null, h("a", { href: `#/${r.path}`, "data-route": r.path }, r.label)));
  nav = h("nav", { "aria-label": "Main" }, h("ul", null, links));
  main = h("main", { id: "main", tabindex: "-1" });
  app.append(
    h("header", { class: "top" },
      h("a", { class: "brand", href: "#/sandboxes" }, "kiln"),
      h("span", { class: "who" }, session!.admin ? "admin key" : "key"),
      h("button", { type: "button", class: "signout", onclick: () => { forgetKey(); signIn(); } }, "Sign out")),
    nav, main);
  render(false);
}

function render(focus = true): void {
  if (!session) return;
  endScope();
  const { name, arg } = route();
  const r = ROUTES.find((x) => x.path === name) || ROUTES[0];
  for (const a of nav.querySelectorAll("a")) {
    if (a.dataset.route === r.path) a.setAttribute("aria-current", "page");
    else a.removeAttribute("aria-current");
  }
  clear(main);
  scope = new Scope();
  const view: View = name === "sandboxes" && arg ? sandboxView : name === "images" && arg ? imageView : r.view;
  if (r.adminOnly && !session.admin) {
    main.append(h("h1", null, r.label), alertBox("Keys are managed with an admin key; this key is not one."));
  } else {
    view(main, scope, session, arg);
  }
  document.title = `${r.label} · kiln console`;
  if (focus) main.focus({ preventScroll: false });
}

setUnauthorizedHandler((e) => {
  if (refused) return;
  refused = e;
  const key = getKey();
  forgetKey();
  signIn(`kilnd refused the API key (${e.message}): it is wrong, revoked or expired. Sign in again with a valid key.`);
  if (key) {
    // One retry with the same key, for a key that was refused by mistake (e.g. restored later).
    const slot = app.querySelector(".signin .alert .actions") || app.querySelector(".signin .alert");
    slot?.append(h("button", { type: "button", onclick: () => { refused = null; start(key).catch((err) => signIn(refusalText(err))); } },
      "Retry with the same key"));
  }
});

window.addEventListener("hashchange", () => render(true));
window.addEventListener("error", () => { /* never show stack traces; views report their own errors */ });

const stored = getKey();
if (stored) {
  start(stored).catch((e) => {
    forgetKey();
    signIn(refusalText(e));
  });
} else {
  signIn();
}
