// The web app at /: signs in (the token lives in localStorage and is sent only in `hello`, never in
// a URL), keeps one reconnecting WebSocket, turns the relay's replies and events into AppState, and
// shows the view the user is on. Views are in *-view.js; the alarm overlay sits above them all.

import { h, mount } from './dom.js';
import { RelaySocket, RelayError } from './relay.js';
import { AppState } from './store.js';
import { loadMapSupport } from './map-loader.js';
import { refreshTimes } from './format.js';
import { renderSignIn } from './sign-in-view.js';
import { renderHome } from './home-view.js';
import { renderWalk } from './walk-view.js';
import { loadTrails } from './walk-trail.js';
import { renderWalker, WalkerMode } from './walker-view.js';
import { AlarmOverlay } from './alarm-view.js';
import { AlarmNotifications } from './alarm-notifications.js';
import { MessageBook } from './messages.js';
import { loadFriendsMap, handleFriendsMapEvent, friendMoved, friendGone } from './friends-map-sync.js';
import { renderFriendsMap } from './friends-map-view.js';
import { renderSharing } from './sharing-view.js';
import { renderThread } from './thread-view.js';

const TOKEN_KEY = 'homeward.token';

const state = new AppState();
const root = document.getElementById('app');
const statusBar = h('div', { class: 'status', role: 'status', id: 'connection' });
const toast = h('div', { class: 'toast hidden', role: 'alert', id: 'toast' });
// New messages and meeting points are announced here, politely: never a focus change, never over an alarm.
const announcer = h('div', { class: 'announcer hidden', role: 'status', 'aria-live': 'polite', id: 'announcer' });
const main = h('div', { class: 'view', id: 'view' });
const overlayLayer = h('div', { id: 'overlay' });
mount(root, statusBar, announcer, main, toast, overlayLayer);

let view = { name: 'loading' };
let authenticated = false;

const socket = new RelaySocket({ onOpen: authenticate });
const app = {
  state, socket,
  mapSupport: loadMapSupport(),
  show, notify, announce, signedIn, signOut, reportError, openAlarm,
  walker: null,
  messages: new MessageBook(),
  readingThread: null, // the friend whose thread is on screen (their messages are read as they come)
};
app.walker = new WalkerMode(app);
app.alarms = new AlarmOverlay(app, overlayLayer);
app.notifications = new AlarmNotifications(app);

// A notification's click opens `/#alarm=ID` (no window open) or sends the id to this window: the
// alarm view opens as soon as that alarm is known (it arrives after sign-in with the backlog).
let alarmToOpen = null;
openAlarm(new URLSearchParams(location.hash.slice(1)).get('alarm'));
state.addEventListener('changed', (event) => { if (event.detail === 'alarms') openWantedAlarm(); });

socket.addEventListener('state', showConnection);
socket.addEventListener('message', (event) => handleEvent(event.detail));
socket.addEventListener('closed', () => { authenticated = false; });
showConnection();
socket.start();
setInterval(tick, 1000);

async function authenticate() {
  const token = localStorage.getItem(TOKEN_KEY);
  if (!token) {
    show({ name: 'sign-in' });
    return;
  }
  try {
    const reply = await socket.request('hello', { token });
    await signedIn(reply);
  } catch (error) {
    if (error instanceof RelayError && error.code === 'unauthenticated') {
      localStorage.removeItem(TOKEN_KEY);
      state.reset();
      show({ name: 'sign-in', message: 'Your sign-in has expired. Please sign in again.' });
    } else {
      reportError(error);
    }
  }
}

/** After register, login or hello: remember the token and load what the screen shows. */
async function signedIn(reply) {
  if (reply.token) localStorage.setItem(TOKEN_KEY, reply.token);
  const sameUser = state.me && state.me.username === reply.user.username;
  if (!sameUser) state.reset();
  state.me = reply.user;
  app.messages.open(reply.user.username);
  state.features = reply.features || [];
  state.vapidPublicKey = reply.vapidPublicKey || null;
  authenticated = true;
  app.notifications.refresh();
  const [friends, sessions] = await Promise.all([socket.request('friend.list'), socket.request('session.list')]);
  state.setFriendList(friends);
  state.setSessionList(sessions);
  loadTrails(app).catch(reportError);
  app.walker.resume();
  await loadFriendsMap(app).catch(reportError);
  if (!sameUser || view.name === 'sign-in' || view.name === 'loading') show({ name: 'home' });
  else show(view);
}

async function signOut() {
  await app.notifications.turnOffAtSignOut();
  try {
    await socket.request('logout');
  } catch {
    // Offline: the token is forgotten here anyway.
  }
  localStorage.removeItem(TOKEN_KEY);
  app.messages.forget();
  app.walker.stop();
  state.reset();
  authenticated = false;
  show({ name: 'sign-in' });
}

function openAlarm(alarmId) {
  if (!alarmId) return;
  alarmToOpen = alarmId;
  openWantedAlarm();
}

function openWantedAlarm() {
  if (!alarmToOpen || !state.alarms.has(alarmToOpen)) return;
  const alarmId = alarmToOpen;
  alarmToOpen = null;
  if (location.hash) history.replaceState(null, '', location.pathname);
  app.alarms.open(alarmId);
}

function show(next) {
  if (view.cleanup) view.cleanup();
  view = next;
  document.body.dataset.view = next.name;
  switch (next.name) {
    case 'sign-in': view.cleanup = renderSignIn(app, main, next); break;
    case 'home': view.cleanup = renderHome(app, main); break;
    case 'walk': view.cleanup = renderWalk(app, main, next.sessionId); break;
    case 'walker': view.cleanup = renderWalker(app, main); break;
    case 'map': view.cleanup = renderFriendsMap(app, main); break;
    case 'sharing': view.cleanup = renderSharing(app, main); break;
    case 'thread': view.cleanup = renderThread(app, main, next.username); break;
    default: mount(main, h('p', { class: 'loading' }, 'Connecting…'));
  }
  tick();
}

function handleEvent(message) {
  if (handleFriendsMapEvent(app, message)) return;
  switch (message.type) {
    case 'friend.request':
    case 'friend.added':
    case 'friend.declined':
    case 'friend.removed':
      if (message.type === 'friend.request') notify(`${message.from.name || message.from.username} wants to be your friend`);
      if (message.type === 'friend.removed') friendGone(app, message.username);
      refreshLists();
      break;
    case 'presence': {
      const friend = state.friends.get(message.username);
      if (friend) {
        friend.online = message.online;
        friend.lastSeen = message.lastSeen;
        state.changed('friends');
      }
      break;
    }
    case 'session.invite':
      state.invites.set(message.session.sessionId, message.session);
      notify(`${message.session.owner.name || message.session.owner.username} asks you to follow their walk`);
      state.changed('sessions');
      break;
    case 'session.accepted':
    case 'session.declined':
    case 'session.left':
      refreshLists();
      break;
    case 'session.ended': {
      state.invites.delete(message.sessionId);
      const walk = state.following.get(message.sessionId)
        || (state.own && state.own.session.sessionId === message.sessionId ? state.own : null);
      if (walk) walk.ended = message.reason || 'ended';
      if (walk && walk === state.own) app.walker.ended(message.reason);
      state.changed('sessions');
      state.changed('own');
      break;
    }
    case 'session.lost': {
      const walk = state.following.get(message.sessionId);
      if (walk) {
        walk.lost = { since: message.since, lastPosition: message.lastPosition };
        state.changed(`position:${message.sessionId}`);
        state.changed('sessions');
      }
      break;
    }
    case 'session.resumed': {
      const walk = state.following.get(message.sessionId);
      if (walk) {
        walk.lost = null;
        state.changed(`position:${message.sessionId}`);
        state.changed('sessions');
      }
      break;
    }
    case 'pos': {
      let explained = false;
      for (const walk of state.walksOf(message.from)) {
        explained = true;
        if (walk === state.own) continue; // our own fixes are drawn as they are taken
        walk.add(message);
        state.changed(`position:${walk.session.sessionId}`);
      }
      for (const alarm of state.alarms.values()) {
        if (alarm.from.username === message.from) {
          explained = true;
          alarm.position = message;
          state.changed('alarms');
        }
      }
      friendMoved(app, message, explained);
      break;
    }
    case 'alarm':
      state.alarms.set(message.alarm.alarmId, { ...message.alarm, repeat: message.repeat });
      state.changed('alarms');
      break;
    case 'alarm.acked':
    case 'alarm.acknowledged': {
      const alarm = state.alarms.get(message.alarmId);
      const by = typeof message.by === 'object' && message.by ? message.by.username : message.by;
      if (alarm && by && !alarm.acked.includes(by)) {
        alarm.acked = [...alarm.acked, by];
        state.changed('alarms');
      }
      break;
    }
    case 'alarm.cancelled': {
      const alarm = state.alarms.get(message.alarmId);
      if (alarm) {
        state.alarms.delete(message.alarmId);
        if (alarm.from.username !== state.me?.username) notify(`${alarm.from.name || alarm.from.username} cancelled the alarm${message.reason ? `: ${message.reason}` : ''}`);
        state.changed('alarms');
      }
      break;
    }
    default:
      break;
  }
}

async function refreshLists() {
  if (!authenticated) return;
  try {
    const [friends, sessions] = await Promise.all([socket.request('friend.list'), socket.request('session.list')]);
    state.setFriendList(friends);
    state.setSessionList(sessions);
  } catch (error) {
    if (!(error instanceof RelayError && error.code === 'offline')) reportError(error);
  }
}

function showConnection() {
  const s = socket.state;
  document.body.classList.toggle('offline', s !== 'open');
  statusBar.dataset.state = s;
  if (s === 'open') {
    mount(statusBar, h('span', { class: 'dot online' }), state.me ? `Online as @${state.me.username}` : 'Online');
  } else if (s === 'connecting') {
    mount(statusBar, h('span', { class: 'dot' }), 'Connecting…');
  } else {
    const retry = h('button', { type: 'button', class: 'link', onclick: () => socket.reconnectSoon() }, 'Retry now');
    mount(statusBar, h('span', { class: 'dot offline' }), h('span', { 'data-retry': '' }, 'Offline: reconnecting…'), ' ', retry);
  }
}

function notify(text) {
  toast.textContent = text;
  toast.classList.remove('hidden');
  clearTimeout(notify.timer);
  notify.timer = setTimeout(() => toast.classList.add('hidden'), 5000);
}

function announce(text) {
  announcer.textContent = text;
  announcer.classList.remove('hidden');
  clearTimeout(announce.timer);
  announce.timer = setTimeout(() => announcer.classList.add('hidden'), 6000);
}

function reportError(error) {
  const text = error instanceof RelayError
    ? (error.code === 'offline' ? 'You are offline; try again when the connection is back.' : error.message)
    : String(error && error.message ? error.message : error);
  notify(text);
}

/** Once a second: the "12 s ago" texts, the countdowns and the reconnect timer. */
function tick() {
  const now = Date.now();
  refreshTimes(document, now);
  const retry = statusBar.querySelector('[data-retry]');
  if (retry && socket.nextAttemptAt) {
    const s = Math.max(0, Math.ceil((socket.nextAttemptAt - now) / 1000));
    retry.textContent = `Offline: reconnecting in ${s} s`;
  }
}
