// Building the page without innerHTML: every text from the relay (names, notes, alarm texts) goes in
// as a text node, so nothing a user types can become markup. The CSP forbids inline script and
// style attributes; classes do the styling.

import { ago, countdown } from './format.js';

export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (key.startsWith('on') && typeof value === 'function') el.addEventListener(key.slice(2), value);
    else if (key === 'class') el.className = value;
    else if (key === 'dataset') Object.assign(el.dataset, value);
    else if (key === 'value') el.value = value;
    else el.setAttribute(key, value === true ? '' : String(value));
  }
  for (const child of children.flat(Infinity)) {
    if (child === undefined || child === null || child === false) continue;
    el.append(child instanceof Node ? child : String(child));
  }
  return el;
}

/** Replaces the children of `parent` with `children`. */
export function mount(parent, ...children) {
  parent.replaceChildren(...children.flat(Infinity).filter((c) => c !== null && c !== undefined && c !== false));
}

/** The values of a form's named inputs, trimmed. */
export function formValues(form) {
  const values = {};
  for (const [key, value] of new FormData(form).entries()) values[key] = typeof value === 'string' ? value.trim() : value;
  return values;
}

/** "12 s ago", kept current by refreshTimes (format.js) once a second. */
export function agoText(ts, attrs = {}) {
  return h('span', { ...attrs, 'data-ago': ts }, ago(ts));
}

/** A countdown to `deadline`, kept current by refreshTimes. */
export function countdownText(deadline, attrs = {}) {
  return h('span', { ...attrs, 'data-countdown': deadline, class: Date.now() > deadline ? 'overdue' : null }, countdown(deadline));
}
