// One friend's thread: what was said, each of ours with where it is (sending, queued while they are
// offline, delivered, read), and a box to write. Their messages are marked read (msg.read) while the
// thread is on screen and the page visible; the relay then forgets them, this browser keeps them.

import { h, mount } from './dom.js';
import { deliveryState } from './messages.js';
import { displayName, when } from './format.js';

export function renderThread(app, main, friend) {
  const { state, socket, messages } = app;
  const list = h('ol', { class: 'thread', 'aria-label': `Messages with ${state.nameOf(friend)}` });
  const input = h('input', { name: 'text', maxlength: 1000, required: true, autocomplete: 'off', 'aria-label': 'Message', placeholder: 'Write a message' });
  const form = h('form', { class: 'inline', id: 'message-form', onsubmit: send }, input, h('button', { type: 'submit' }, 'Send'));
  const title = h('h1', {});
  mount(main,
    h('header', { class: 'top' },
      h('button', { type: 'button', class: 'link', onclick: () => app.show({ name: 'home' }) }, '‹ Back'), title),
    list, form);
  const sending = []; // our messages the relay has not answered yet: [{text}]

  function draw() {
    const known = state.friends.get(friend);
    title.textContent = known ? displayName(known) : `@${friend}`;
    const items = messages.thread(friend).map((m) => {
      const mine = m.from !== friend;
      return h('li', { class: mine ? 'mine' : 'theirs', dataset: { message: m.messageId } },
        h('p', { class: 'text' }, m.text),
        h('p', { class: 'meta' }, mine ? status(m) : when(m.queuedAt)));
    });
    for (const pending of sending) items.push(h('li', { class: 'mine' }, h('p', { class: 'text' }, pending.text), h('p', { class: 'meta' }, 'Sending…')));
    mount(list, items.length ? items : h('li', { class: 'muted empty' }, 'No messages yet.'));
    if (!known) form.classList.add('hidden');
    list.lastElementChild?.scrollIntoView({ block: 'nearest' });
  }

  function status(m) {
    const { state: where, at } = deliveryState(m);
    if (where === 'read') return `Read ${when(at)}`;
    if (where === 'delivered') return `Delivered ${when(at)}`;
    return `Sent ${when(at)}: queued until ${state.nameOf(friend)} is online`;
  }

  async function send(event) {
    event.preventDefault();
    const text = input.value;
    if (!text.trim()) return;
    const pending = { text };
    sending.push(pending);
    input.value = '';
    draw();
    try {
      const reply = await socket.request('msg.send', { to: friend, text });
      messages.add(reply.message);
    } catch (error) {
      input.value = input.value || text;
      app.notify(error.code === 'bad_request' ? `Not sent: ${error.message}` : error.code === 'rate_limited' ? `Not sent: ${error.message}` : error.message);
    } finally {
      sending.splice(sending.indexOf(pending), 1);
      draw();
    }
  }

  /** Their unread messages, read now that the thread is on screen (and the page visible). */
  const reading = new Set();
  async function readAll() {
    if (document.visibilityState !== 'visible' || !socket.isOpen) return;
    let read = 0;
    for (const m of messages.thread(friend)) {
      if (m.from !== friend || m.read || reading.has(m.messageId)) continue;
      reading.add(m.messageId);
      try {
        await socket.request('msg.read', { messageId: m.messageId });
        messages.update(m.messageId, { read: true });
        read += 1;
      } catch (error) {
        // not_found: already read on another device of ours (the relay forgot it). Else: try again later.
        if (error.code === 'not_found') messages.update(m.messageId, { read: true });
      } finally {
        reading.delete(m.messageId);
      }
    }
    if (read) state.changed('messages');
  }

  app.readingThread = friend;
  const onChange = (event) => {
    if (event.detail === 'friends') draw();
    if (event.detail === 'messages') readAll();
  };
  messages.addEventListener('changed', draw);
  state.addEventListener('changed', onChange);
  document.addEventListener('visibilitychange', readAll);
  draw();
  readAll();
  input.focus();
  return () => {
    if (app.readingThread === friend) app.readingThread = null;
    messages.removeEventListener('changed', draw);
    state.removeEventListener('changed', onChange);
    document.removeEventListener('visibilitychange', readAll);
  };
}
