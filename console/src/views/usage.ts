import { api } from "../api";
import { clear, h, s } from "../dom";
import type { Session } from "../main";
import { ErrorSlot, field, gauge, money, Scope } from "../ui";

interface Row { group: string; cpuSeconds: number; gibHours: number; gbMonths: number; costMicros: number; sandboxes: number }
interface Usage {
  from: string; to: string; data: Row[]; total: Row;
  buckets?: { from: string; to: string; data: Row[]; total: Row }[];
}
interface Limits { daily: { limitMicros: number | null; usedMicros: number; remainingMicros: number | null } }

const RANGES: [string, number, number][] = [ // label, seconds, bucket seconds
  ["Last hour", 3600, 60], ["Last 6 hours", 6 * 3600, 600], ["Last 24 hours", 86400, 1800],
  ["Last 7 days", 7 * 86400, 3 * 3600], ["Last 30 days", 30 * 86400, 12 * 3600],
];

export function usageView(main: HTMLElement, scope: Scope, _s: Session): void {
  const errors = new ErrorSlot();
  const groupBy = h("select", null, h("option", { value: "key" }, "key"), h("option", { value: "label" }, "label"));
  const labelName = h("input", { type: "text", placeholder: "team", autocomplete: "off" });
  const range = h("select", null, RANGES.map(([l], i) => h("option", { value: i }, l)));
  const form = h("form", { class: "inline-form", "aria-label": "Usage options" },
    field("Group by", groupBy), field("Label name", labelName, "with group by label"), field("Range", range),
    h("button", { type: "submit" }, "Show"));
  const limits = h("div", { class: "limits" });
  const charts = h("div", { class: "charts" });
  const totals = h("tbody");
  main.append(h("h1", { tabindex: "-1" }, "Usage"), errors.el,
    h("section", { "aria-labelledby": "limit-title" }, h("h2", { id: "limit-title" }, "Daily limit"), limits),
    form, charts,
    h("section", { "aria-labelledby": "totals-title" }, h("h2", { id: "totals-title" }, "Totals"),
      h("div", { class: "table-wrap", role: "region", "aria-label": "Usage totals table", tabindex: "0" },
        h("table", { class: "grid usage-totals" }, h("thead", null, h("tr", null, ["Group", "Cost", "CPU-seconds", "GiB-hours", "Sandboxes"]
          .map((c) => h("th", { scope: "col" }, c)))), totals))));
  form.addEventListener("submit", (ev) => { ev.preventDefault(); p.now(); });
  groupBy.addEventListener("change", () => p.now());
  range.addEventListener("change", () => p.now());

  const p = scope.poll(30000, async () => {
    const [label, secs, bucket] = RANGES[Number(range.value) || 0];
    const to = new Date(), from = new Date(to.getTime() - secs * 1000);
    const query: Record<string, string | number> = { from: from.toISOString(), to: to.toISOString(), groupBy: groupBy.value, bucketSeconds: bucket };
    if (groupBy.value === "label") {
      if (!labelName.value.trim()) { errors.show("Name the label to group by."); return; }
      query.label = labelName.value.trim();
    }
    try {
      const [u, l] = await Promise.all([
        api<Usage>("/v1/usage", { query, signal: scope.signal }),
        api<Limits>("/v1/limits", { signal: scope.signal }),
      ]);
      errors.clear();
      clear(limits);
      const d = l.daily;
      if (d.limitMicros === null) {
        limits.append(h("p", null, `No daily limit on this key; ${money(d.usedMicros)} spent in the last 24 hours.`));
      } else {
        limits.append(gauge("Daily limit used", d.usedMicros, d.limitMicros,
          `${money(d.remainingMicros)} left of ${money(d.limitMicros)} (${money(d.usedMicros)} spent in the last 24 hours)`));
      }
      clear(charts);
      if (!u.buckets) {
        charts.append(h("p", null, "This kilnd does not report usage over time (no buckets in its answer)."));
      } else {
        charts.append(chart(`Cost per ${dur(bucket)} by ${groupBy.value}, ${label.toLowerCase()}`, u, (r) => r.costMicros / 1e6, (v) => `$${v.toFixed(4)}`, "cost"),
          chart(`CPU-seconds per ${dur(bucket)} by ${groupBy.value}, ${label.toLowerCase()}`, u, (r) => r.cpuSeconds, (v) => `${v.toFixed(1)} s`, "cpu"));
      }
      clear(totals);
      for (const r of [...u.data, { ...u.total, group: "total", sandboxes: NaN } as Row]) {
        totals.append(h("tr", { "data-group": r.group }, h("th", { scope: "row" }, r.group), h("td", null, money(r.costMicros)),
          h("td", { class: "cpu" }, r.cpuSeconds.toFixed(2)), h("td", null, r.gibHours.toFixed(4)), h("td", null, isNaN(r.sandboxes) ? "" : r.sandboxes)));
      }
    } catch (e) {
      if (!scope.dead) errors.show(e, () => p.now());
    }
  });
}

function dur(sec: number): string {
  return sec % 3600 === 0 ? `${sec / 3600} h` : `${sec / 60} min`;
}

/** A line per group over the buckets, in plain SVG (no inline styles: colours come from classes). */
function chart(title: string, u: Usage, value: (r: Row) => number, fmt: (v: number) => string, kind: string): HTMLElement {
  const W = 640, H = 220, L = 64, R = 12, T = 12, B = 28;
  const buckets = u.buckets || [];
  const groups = [...new Set(buckets.flatMap((b) => b.data.map((r) => r.group)))].slice(0, 8);
  let max = 0, nonzero = 0;
  for (const b of buckets) for (const r of b.data) { const v = value(r); max = Math.max(max, v); if (v > 0) nonzero++; }
  const ymax = max > 0 ? max * 1.1 : 1;
  const x = (i: number) => L + (buckets.length > 1 ? (i / (buckets.length - 1)) * (W - L - R) : (W - L - R) / 2);
  const y = (v: number) => T + (1 - v / ymax) * (H - T - B);
  const svg = s("svg", { viewBox: `0 0 ${W} ${H}`, class: "chart", role: "img", "aria-label": title, preserveAspectRatio: "none" });
  svg.append(s("line", { x1: L, y1: H - B, x2: W - R, y2: H - B, class: "axis" }), s("line", { x1: L, y1: T, x2: L, y2: H - B, class: "axis" }),
    s("text", { x: L - 6, y: T + 10, class: "tick", "text-anchor": "end" }, fmt(ymax)), s("text", { x: L - 6, y: H - B, class: "tick", "text-anchor": "end" }, fmt(0)));
  if (buckets.length) {
    svg.append(s("text", { x: L, y: H - 8, class: "tick" }, new Date(buckets[0].from).toLocaleString()),
      s("text", { x: W - R, y: H - 8, class: "tick", "text-anchor": "end" }, new Date(buckets[buckets.length - 1].to).toLocaleString()));
  }
  groups.forEach((g, gi) => {
    const pts = buckets.map((b, i) => {
      const r = b.data.find((d) => d.group === g);
      return [x(i), y(r ? value(r) : 0)] as const;
    });
    svg.append(s("polyline", { points: pts.map(([a, b]) => `${a.toFixed(1)},${b.toFixed(1)}`).join(" "), class: `series s${gi}` }));
    buckets.forEach((b, i) => {
      const r = b.data.find((d) => d.group === g);
      if (r && value(r) > 0) {
        svg.append(s("circle", { cx: pts[i][0].toFixed(1), cy: pts[i][1].toFixed(1), r: 3, class: `point s${gi}` },
          s("title", null, `${g}: ${fmt(value(r))} (${new Date(b.from).toLocaleTimeString()})`)));
      }
    });
  });
  const legend = h("ul", { class: "legend" }, groups.map((g, gi) => h("li", null, h("span", { class: `swatch s${gi}`, "aria-hidden": "true" }), g)));
  return h("figure", { class: `chart-box chart-${kind}`, "data-nonzero": nonzero, "data-buckets": buckets.length },
    h("figcaption", null, title), svg, groups.length ? legend : h("p", null, "No usage in this range."));
}
