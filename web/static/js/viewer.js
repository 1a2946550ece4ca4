// The share-link viewer at /f#TOKEN: the token is read from the fragment (which browsers never send
// to a server), removed from the address bar at once, kept in sessionStorage for a reload, and sent
// only in `watch`. Read-only: the page shows the walk, its owner, times and alarms, and says plainly
// when the walk ended or the link is unknown, expired or revoked.

import { h, mount } from './dom.js';
import { RelaySocket } from './relay.js';
import { loadMapSupport } from './map-loader.js';
import { WalkMap } from './walk-map.js';
import { walkFacts, endingText } from './walk-info.js';
import { Walk } from './store.js';
import { askedNow } from './walk-trail.js';
import { refreshTimes, clock, coordinates } from './format.js';

const TOKEN_KEY = 'homeward.share-token';
const root = document.getElementById('app');

const fragment = location.hash.slice(1);
if (fragment) {
  let decoded = '';
  try {
    decoded = decodeURIComponent(fragment);
  } catch {
    // A mangled link (a stray %): the format check below turns it into the "does not work" page.
  }
  sessionStorage.setItem(TOKEN_KEY, decoded);
}
if (location.href.includes('#')) history.replaceState(null, '', location.pathname + location.search);
const token = sessionStorage.getItem(TOKEN_KEY);

const status = h('div', { class: 'status', role: 'status', id: 'connection' });
const main = h('div', { class: 'view', id: 'view' });
mount(root, status, main);
document.body.dataset.view = 'viewer';

let walk = null;
let map = null;
let finished = false; // ended or refused: no more reconnects
const alarms = new Map();

const socket = new RelaySocket({ onOpen: watch, shouldReconnect: () => !finished });
socket.addEventListener('message', (event) => handle(event.detail));
socket.addEventListener('state', showStatus);
setInterval(() => refreshTimes(), 1000);

if (!token || !/^[A-Za-z0-9_.~\-]{16,512}$/.test(token)) {
  unavailable();
} else {
  mount(main, h('p', { class: 'loading' }, 'Opening the shared walk…'));
  socket.start();
}

async function watch() {
  try {
    const askedAt = askedNow();
    const reply = await socket.request('watch', { token });
    start(reply.session, reply.lastPosition, reply.trail, askedAt);
  } catch (error) {
    // not_found is the relay's one answer for unknown, expired and revoked links; a relay without share
    // links (unsupported, or unauthenticated from a 1.0 relay) cannot open one either.
    if (['not_found', 'forbidden', 'bad_request', 'unsupported', 'unauthenticated'].includes(error.code)) unavailable();
    else if (error.code === 'rate_limited') {
      // The relay closes the connection after this; retrying by itself would only prolong the wait.
      finished = true;
      mount(main, h('p', { class: 'banner lost', id: 'rate-limited' }, 'Too many attempts from this network. Wait a few minutes and reload.'));
    }
  }
}

function start(session, lastPosition, trail, askedAt) {
  const first = !walk;
  if (first) walk = new Walk(session);
  else walk.session = session;
  walk.lost = null;
  if (lastPosition) add(lastPosition);
  // Every watch (also after a reconnect) brings the relay's trail, which replaces what was drawn.
  walk.setTrail(trail, askedAt);
  if (!first) { draw(); return; }
  const owner = session.owner;
  const mapBox = h('div', { class: 'map', id: 'walk-map' });
  mount(main,
    h('header', { class: 'top' }, h('h1', {}, `${owner.name || owner.username} is walking`)),
    h('div', { id: 'viewer-alarms' }), mapBox, h('div', { class: 'info', id: 'walk-info' }),
    h('p', { class: 'muted small' }, 'You are watching through a share link. It stops working when the walk ends or the link is revoked.'));
  loadMapSupport().then((support) => {
    map = new WalkMap(mapBox, support);
    walk.map = map;
    map.setDestination(session.destination);
    for (const p of walk.track) map.addPosition(p);
    map.refresh();
  });
  draw();
}

function add(pos) {
  const last = walk.last;
  if (last && last.ts === pos.ts && last.lat === pos.lat && last.lon === pos.lon) return;
  walk.add(pos);
}

function handle(message) {
  if (!walk) return;
  switch (message.type) {
    case 'pos': add(message); break;
    case 'session.lost': walk.lost = { since: message.since, lastPosition: message.lastPosition }; break;
    case 'session.resumed': walk.lost = null; break;
    case 'session.ended':
      walk.ended = message.reason || 'ended';
      finished = true;
      break;
    case 'alarm': alarms.set(message.alarm.alarmId, message.alarm); break;
    case 'alarm.cancelled': alarms.delete(message.alarmId); break;
    case 'alarm.acked':
    case 'alarm.acknowledged': {
      const alarm = alarms.get(message.alarmId);
      const by = typeof message.by === 'object' && message.by ? message.by.username : message.by;
      if (alarm && by && !alarm.acked.includes(by)) alarm.acked = [...alarm.acked, by];
      break;
    }
    default: return;
  }
  draw();
}

function draw() {
  const title = document.querySelector('header.top h1');
  const owner = walk.session.owner.name || walk.session.owner.username;
  if (title) title.textContent = walk.ended ? `${owner}'s walk` : `${owner} is walking`;
  const info = document.getElementById('walk-info');
  if (info) mount(info, walkFacts(walk));
  document.body.classList.toggle('walk-ended', Boolean(walk.ended));
  const box = document.getElementById('viewer-alarms');
  if (box) {
    mount(box, [...alarms.values()].map((alarm) => h('div', { class: 'banner alarm-own viewer-alarm', dataset: { alarm: alarm.alarmId } },
      h('p', {}, h('strong', {}, 'ALARM: '), alarm.text),
      h('p', {}, `Raised at ${clock(alarm.createdAt)}`, alarm.position ? ` at ${coordinates(alarm.position)}` : ''),
      h('p', {}, alarm.acked.length ? `On it: ${alarm.acked.join(', ')}` : 'No friend has answered yet.'))));
  }
  showStatus();
}

function unavailable() {
  finished = true;
  socket.stop();
  sessionStorage.removeItem(TOKEN_KEY);
  document.body.dataset.view = 'unavailable';
  mount(main, h('div', { class: 'card unavailable', id: 'link-unavailable' },
    h('h1', {}, 'This link does not work'),
    h('p', {}, 'The walk it shared is unknown, the link has expired, or its owner revoked it.'),
    h('p', { class: 'muted' }, 'Ask the person who sent it for a new link.')));
  mount(status);
}

function showStatus() {
  if (document.body.dataset.view === 'unavailable') return;
  if (walk && walk.ended) {
    mount(status, h('span', { class: 'dot offline' }), endingText(walk.ended));
    return;
  }
  const s = socket.state;
  document.body.classList.toggle('offline', s !== 'open');
  mount(status, h('span', { class: `dot ${s === 'open' ? 'online' : 'offline'}` }),
    s === 'open' ? 'Live' : s === 'connecting' ? 'Connecting…' : 'Offline: reconnecting…');
}
