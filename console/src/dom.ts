// Tiny DOM helpers: no innerHTML anywhere (strings are always text), no style="" attributes.
export type Child = Node | string | number | null | undefined | false;
type Attrs = Record<string, unknown> | null | undefined;

function apply(el: Element, attrs: Attrs, children: (Child | Child[])[]): void {
  if (attrs) {
    for (const [k, v] of Object.entries(attrs)) {
      if (v === undefined || v === null || v === false) continue;
      if (k.startsWith("on") && typeof v === "function") {
        el.addEventListener(k.slice(2).toLowerCase(), v as EventListener);
      } else if (k === "text") {
        el.textContent = String(v);
      } else if (k === "value" && "value" in el) {
        (el as HTMLInputElement).value = String(v);
      } else {
        el.setAttribute(k === "className" ? "class" : k, v === true ? "" : String(v));
      }
    }
  }
  for (const c of children.flat()) {
    if (c === null || c === undefined || c === false) continue;
    el.append(typeof c === "object" ? c : String(c));
  }
}

export function h<K extends keyof HTMLElementTagNameMap>(tag: K, attrs?: Attrs, ...children: (Child | Child[])[]): HTMLElementTagNameMap[K] {
  const el = document.createElement(tag);
  apply(el, attrs, children);
  return el;
}

const SVG = "http://www.w3.org/2000/svg";
export function s(tag: string, attrs?: Attrs, ...children: (Child | Child[])[]): SVGElement {
  const el = document.createElementNS(SVG, tag) as SVGElement;
  apply(el, attrs, children);
  return el;
}

export function clear(el: Element): void {
  while (el.firstChild) el.firstChild.remove();
}

/** Sets text only when it changed (keeps selection and focus steady on polls). */
export function setText(el: Element, text: string): void {
  if (el.textContent !== text) el.textContent = text;
}
