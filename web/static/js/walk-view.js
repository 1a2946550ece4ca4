// Following one walk: the map, the facts under it, and "Stop following".

import { h, mount } from './dom.js';
import { WalkMap } from './walk-map.js';
import { walkFacts } from './walk-info.js';

export function renderWalk(app, main, sessionId) {
  const { state } = app;
  const walk = state.following.get(sessionId);
  if (!walk) {
    app.show({ name: 'home' });
    return () => {};
  }
  const owner = walk.session.owner;
  const mapBox = h('div', { class: 'map', id: 'walk-map' });
  const info = h('div', { class: 'info', id: 'walk-info' });
  const leave = h('button', { type: 'button', id: 'stop-following', onclick: stop }, walk.ended ? 'Close' : 'Stop following');
  mount(main,
    h('header', { class: 'top' },
      h('button', { type: 'button', class: 'link', onclick: () => app.show({ name: 'home' }) }, '‹ Back'),
      h('h1', {}, owner.name || owner.username)),
    walk.session.note ? h('p', { class: 'note' }, walk.session.note) : null,
    mapBox, info, leave);

  let disposed = false;
  app.mapSupport.then((support) => {
    if (disposed) return;
    walk.map = new WalkMap(mapBox, support);
    walk.map.setDestination(walk.session.destination);
    for (const p of walk.track) walk.map.addPosition(p);
    walk.map.refresh();
  });

  const draw = () => {
    mount(info, walkFacts(walk));
    leave.textContent = walk.ended ? 'Close' : 'Stop following';
    mapBox.classList.toggle('lost', Boolean(walk.lost));
  };

  async function stop() {
    if (!walk.ended) {
      try {
        await app.socket.request('session.leave', { sessionId });
      } catch (error) {
        if (error.code !== 'not_found') { app.reportError(error); return; }
      }
    }
    state.following.delete(sessionId);
    app.show({ name: 'home' });
  }

  const onChange = (event) => {
    if (event.detail === `position:${sessionId}` || event.detail === 'sessions') draw();
  };
  state.addEventListener('changed', onChange);
  draw();
  return () => {
    disposed = true;
    state.removeEventListener('changed', onChange);
    if (walk.map) walk.map.destroy();
    walk.map = null;
  };
}
