/**
 * Contextual escaping by construction: `html` is a tagged template whose
 * interpolations are escaped unless they are themselves `SafeHtml` (the result
 * of another `html` template). Agent-supplied text (hostnames, platforms) can
 * therefore only ever land in a page as text. Templates put interpolations in
 * element content or double-quoted attribute values, never in URLs, scripts or
 * styles, where entity escaping would not be enough.
 */
export class SafeHtml {
  constructor(readonly value: string) {}
  toString(): string {
    return this.value;
  }
}

export type HtmlValue = SafeHtml | string | number | null | undefined | readonly HtmlValue[];

const ENTITIES: Record<string, string> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' };

export function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (c) => ENTITIES[c]!);
}

function render(value: HtmlValue): string {
  if (value === null || value === undefined) return '';
  if (value instanceof SafeHtml) return value.value;
  if (Array.isArray(value)) return value.map(render).join('');
  return escapeHtml(String(value));
}

export function html(strings: TemplateStringsArray, ...values: HtmlValue[]): SafeHtml {
  let out = strings[0]!;
  values.forEach((v, i) => { out += render(v) + strings[i + 1]!; });
  return new SafeHtml(out);
}
