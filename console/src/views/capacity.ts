import { api } from "../api";
import { clear, h } from "../dom";
import type { Session } from "../main";
import { bytes, ErrorSlot, gauge, Scope } from "../ui";

interface Cap {
  running: number; queued: number; pooled: number;
  memoryMiB: { budget: number; reserved: number; free: number };
  vcpus: { budget: number; reserved: number; free: number };
  diskMiB: { budget: number | null; reserved: number; free: number | null };
  pools: { kind: string; id: string; name?: string; size: number; ready: number; memoryBytes: number }[];
}

export function capacityView(main: HTMLElement, scope: Scope, _s: Session): void {
  const errors = new ErrorSlot();
  const counts = h("div", { class: "counts" });
  const gauges = h("div", { class: "gauges" });
  const pools = h("tbody");
  main.append(h("h1", { tabindex: "-1" }, "Capacity"), errors.el, counts, gauges,
    h("section", { "aria-labelledby": "cap-pools" }, h("h2", { id: "cap-pools" }, "Warm pools"),
      h("div", { class: "table-wrap", role: "region", "aria-label": "Warm pools table", tabindex: "0" },
        h("table", { class: "grid" }, h("thead", null, h("tr", null, ["Pool", "Kind", "Ready", "Size", "Memory"].map((c) => h("th", { scope: "col" }, c)))), pools))));
  const gib = (m: number) => `${(m / 1024).toFixed(1)} GiB`;
  const p = scope.poll(3000, async () => {
    try {
      const c = await api<Cap>("/v1/capacity", { signal: scope.signal });
      errors.clear();
      clear(counts);
      for (const [k, v] of [["Running", c.running], ["Queued", c.queued], ["Pooled", c.pooled]] as const) {
        counts.append(h("div", { class: "count-card" }, h("span", { class: "count-num" }, v), h("span", null, k)));
      }
      clear(gauges);
      gauges.append(
        gauge("Memory reserved", c.memoryMiB.reserved, c.memoryMiB.budget, `${gib(c.memoryMiB.free)} free of ${gib(c.memoryMiB.budget)}`),
        gauge("vCPUs reserved", c.vcpus.reserved, c.vcpus.budget, `${c.vcpus.free} free of ${c.vcpus.budget}`),
        c.diskMiB.budget !== null && c.diskMiB.free !== null
          ? gauge("Disk reserved", c.diskMiB.reserved, c.diskMiB.budget, `${gib(c.diskMiB.free)} free of ${gib(c.diskMiB.budget)}`)
          : h("p", null, `Disk: ${gib(c.diskMiB.reserved)} reserved, no budget set.`),
        ...c.pools.map((x) => gauge(`Pool ${x.name || x.id}`, x.ready, x.size, `${x.ready} of ${x.size} ready`)));
      clear(pools);
      for (const x of c.pools) {
        pools.append(h("tr", null, h("th", { scope: "row", class: "mono" }, x.name || x.id), h("td", null, x.kind), h("td", null, x.ready),
          h("td", null, x.size), h("td", null, bytes(x.memoryBytes))));
      }
      if (!c.pools.length) pools.append(h("tr", null, h("td", { colspan: 5 }, "No warm pools.")));
    } catch (e) {
      if (!scope.dead) errors.show(e, () => p.now());
    }
  });
}
