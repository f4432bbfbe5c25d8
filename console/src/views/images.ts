import { api, ApiError, post } from "../api";
import { clear, h, setText } from "../dom";
import type { Session } from "../main";
import { bytes, confirmAction, ErrorSlot, field, Scope, since, status } from "../ui";

export interface Image {
  id: string; name: string | null; version: number; tags: string[]; state: string; source: string;
  sizeBytes: number; stepsTotal: number; stepsCached: number; stepsRun: number; warm: boolean;
  pool: { size: number; ready: number } | null; createdAt: string; readyAt: string | null;
  error: { code: string; message: string; step?: number; line?: number; instruction?: string; exitCode?: number } | null;
}

const ENDED = new Set(["ready", "failed", "deleted"]);

export function imagesView(main: HTMLElement, scope: Scope, _s: Session): void {
  const errors = new ErrorSlot();
  const tbody = h("tbody");
  main.append(h("h1", { tabindex: "-1" }, "Images"), errors.el,
    h("div", { class: "table-wrap", role: "region", "aria-label": "Images table", tabindex: "0" },
      h("table", { class: "grid images" },
        h("thead", null, h("tr", null, ["Image", "Version", "Tags", "State", "Source", "Steps", "Size", "Pool", "Created"]
          .map((c) => h("th", { scope: "col" }, c)))), tbody)));
  const p = scope.poll(5000, async () => {
    try {
      const r = await api<{ data: Image[] }>("/v1/images", { query: { limit: 100 }, signal: scope.signal });
      errors.clear();
      clear(tbody);
      for (const i of r.data) {
        tbody.append(h("tr", { "data-id": i.id, "data-state": i.state },
          h("th", { scope: "row" }, h("a", { href: `#/images/${encodeURIComponent(i.id)}` }, i.name || i.id)),
          h("td", null, i.version), h("td", null, i.tags.join(", ")), h("td", { class: `state state-${i.state}` }, i.state),
          h("td", null, i.source), h("td", null, `${i.stepsRun} run, ${i.stepsCached} cached of ${i.stepsTotal}`),
          h("td", null, i.sizeBytes ? bytes(i.sizeBytes) : "—"), h("td", null, i.pool ? `${i.pool.ready}/${i.pool.size}` : "—"),
          h("td", null, since(i.createdAt))));
      }
      if (!r.data.length) tbody.append(h("tr", null, h("td", { colspan: 9 }, "No images.")));
    } catch (e) {
      if (!scope.dead) errors.show(e, () => p.now());
    }
  });
}

export function imageView(main: HTMLElement, scope: Scope, _s: Session, id: string): void {
  const base = `/v1/images/${encodeURIComponent(id)}`;
  const errors = new ErrorSlot();
  const note = status();
  const title = h("span", { class: "mono" }, id);
  const facts = h("dl", { class: "facts" });
  const failure = h("div");
  const tags = h("ul", { class: "tags" });
  const versions = h("ul", { class: "versions" });
  const poolSize = h("input", { type: "number", min: 0, max: 64, id: "pool-size" });
  const poolForm = h("form", { class: "inline-form", "aria-label": "Warm pool" },
    field("Pool size", poolSize, "warm copies kept ready (0 turns the pool off)"), h("button", { type: "submit" }, "Set pool size"));
  const tagInput = h("input", { type: "text", autocomplete: "off" });
  const tagForm = h("form", { class: "inline-form", "aria-label": "Add a tag" }, field("Tag", tagInput), h("button", { type: "submit" }, "Add tag"));
  const del = h("button", { type: "button", class: "danger" }, "Delete image");
  const logBox = h("ol", { class: "build-log", role: "log", "aria-label": "Build log", "aria-live": "off", tabindex: "0" });
  const logState = h("p", { class: "status log-state", role: "status" }, "Reading the build log…");
  main.append(h("p", { class: "crumbs" }, h("a", { href: "#/images" }, "Images"), " / ", h("span", { class: "mono" }, id)),
    h("h1", { tabindex: "-1" }, "Image ", title), errors.el, note, failure, facts,
    h("section", { "aria-labelledby": "log-title" }, h("h2", { id: "log-title" }, "Build log"), logState, logBox),
    h("section", { "aria-labelledby": "tags-title" }, h("h2", { id: "tags-title" }, "Tags and versions"), tags, tagForm,
      h("h3", null, "Versions"), versions),
    h("section", { "aria-labelledby": "pool-title" }, h("h2", { id: "pool-title" }, "Warm pool"), poolForm), del);

  let image: Image | null = null;
  let failedStep: number | null = null;
  let poolTouched = false;
  poolSize.addEventListener("input", () => { poolTouched = true; });

  const markFailed = () => {
    if (failedStep === null) return;
    for (const li of logBox.querySelectorAll<HTMLElement>("li")) {
      if (li.dataset.step === String(failedStep)) {
        li.classList.add("failed-step");
        if (!li.querySelector(".failed-mark")) li.prepend(h("span", { class: "failed-mark" }, "failed step: "));
      }
    }
  };

  const info = scope.poll(3000, async () => {
    try {
      const i = await api<Image>(base, { signal: scope.signal });
      image = i;
      errors.clear();
      setText(title, `${i.name || i.id}@${i.version}`);
      clear(facts);
      const f = (k: string, v: string) => facts.append(h("dt", null, k), h("dd", null, v));
      f("State", i.state); f("Source", i.source); f("Steps", `${i.stepsRun} run, ${i.stepsCached} cached of ${i.stepsTotal}`);
      f("Size", i.sizeBytes ? bytes(i.sizeBytes) : "—"); f("Warm", i.warm ? "yes" : "no");
      f("Pool", i.pool ? `${i.pool.ready} ready of ${i.pool.size}` : "—"); f("Created", `${since(i.createdAt)} ago`);
      facts.dataset.state = i.state;
      if (i.error && failedStep === null) {
        failedStep = i.error.step ?? null;
        clear(failure);
        failure.append(h("div", { class: "alert build-failed", role: "alert" },
          h("p", null, i.error.step
            ? `Step ${i.error.step} failed${i.error.exitCode !== undefined ? ` with exit code ${i.error.exitCode}` : ""}: ${i.error.instruction || ""}`
            : `The build failed: ${i.error.message} (${i.error.code})`)));
        markFailed();
      }
      clear(tags);
      for (const t of i.tags) {
        tags.append(h("li", null, h("span", { class: "tag" }, t), " ",
          h("button", { type: "button", "aria-label": `Remove tag ${t}`, onclick: async () => {
            try { await post(`${base}:untag`, { tag: t }); note.textContent = `Removed tag ${t}.`; info.now(); } catch (e) { errors.show(e); }
          } }, "Remove")));
      }
      if (!i.tags.length) tags.append(h("li", null, "No tags."));
      if (!poolTouched) poolSize.value = String(i.pool?.size ?? 0);
      if (i.name) {
        const vs = await api<{ data: Image[] }>("/v1/images", { query: { name: i.name, limit: 50 }, signal: scope.signal });
        clear(versions);
        for (const v of vs.data) {
          versions.append(h("li", null, h("a", { href: `#/images/${encodeURIComponent(v.id)}`, "aria-current": v.id === i.id ? "page" : null },
            `${v.name}@${v.version}`), ` ${v.state}${v.tags.length ? ` (${v.tags.join(", ")})` : ""}`));
        }
      }
    } catch (e) {
      if (scope.dead) return;
      if (e instanceof ApiError && e.status === 404) errors.show(`Image ${id} no longer exists.`, () => info.now());
      else errors.show(e, () => info.now());
    }
  });

  poolForm.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    try {
      const r = await post<{ size: number; ready: number }>(`${base}:pool`, { size: Number(poolSize.value || 0) });
      poolTouched = false;
      note.textContent = `Pool size set to ${r.size} (${r.ready} ready).`;
      info.now();
    } catch (e) { errors.show(e); }
  });
  tagForm.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const t = tagInput.value.trim();
    if (!t) return;
    try { await post(`${base}:tag`, { tag: t }); tagInput.value = ""; note.textContent = `Tagged ${t}.`; info.now(); } catch (e) { errors.show(e); }
  });
  del.addEventListener("click", async () => {
    if (!(await confirmAction(`Delete image ${image?.name || id}@${image?.version ?? ""}?`,
      "No new sandbox can start from it afterwards; this cannot be undone.", "Delete image"))) return;
    try { await post(`${base}:delete`, {}); note.textContent = "Deleted."; info.now(); } catch (e) { errors.show(e); }
  });

  // The log, followed live: a long poll (follow=true, up to 20 s each) from the last line seen.
  void (async () => {
    let after = 0;
    let quietErrors = 0;
    while (!scope.dead) {
      if (document.hidden) { await visible(scope); continue; }
      try {
        const r = await api<{ lines: { n: number; step: number | null; stream: string; text: string }[]; nextAfter: number; done: boolean; state: string }>(
          `${base}/logs`, { query: { after, follow: true }, signal: scope.signal });
        quietErrors = 0;
        for (const l of r.lines) {
          logBox.append(h("li", { "data-n": l.n, "data-step": l.step ?? "", class: `log-${l.stream}` },
            l.step ? h("span", { class: "step" }, `#${l.step} `) : null, l.text));
        }
        if (r.lines.length) logBox.scrollTop = logBox.scrollHeight;
        after = r.nextAfter;
        markFailed();
        if (r.done) {
          logState.textContent = `End of the build log: the build is ${r.state}.`;
          logState.dataset.done = "true";
          info.now();
          return;
        }
        logState.textContent = `Following the build log (${r.state})…`;
      } catch (e) {
        if (scope.dead) return;
        quietErrors++;
        logState.textContent = "The build log could not be read; trying again.";
        if (quietErrors >= 3) errors.show(e, () => info.now());
        await sleep(2000 * Math.min(quietErrors, 5), scope);
      }
    }
  })();
  void ENDED;
}

function sleep(ms: number, scope: Scope): Promise<void> {
  return new Promise((r) => {
    const t = setTimeout(r, ms);
    scope.signal.addEventListener("abort", () => { clearTimeout(t); r(); });
  });
}

function visible(scope: Scope): Promise<void> {
  return new Promise((r) => {
    const f = () => { if (!document.hidden) { document.removeEventListener("visibilitychange", f); r(); } };
    document.addEventListener("visibilitychange", f);
    scope.signal.addEventListener("abort", () => { document.removeEventListener("visibilitychange", f); r(); });
  });
}
