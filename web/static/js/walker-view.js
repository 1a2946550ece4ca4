// Walker mode: "Share my walk" starts a session (all friends invited), sends the phone's positions
// from the Geolocation API while it lasts, checks in, ends, and raises a panic alarm after asking
// for confirmation. WalkerMode keeps sharing while the user looks at other screens, and also sends
// positions while the user shares with chosen friends at all times (the friends' map).

import { h, mount, formValues } from './dom.js';
import { WalkMap } from './walk-map.js';
import { walkFacts, endingText } from './walk-info.js';
import { Walk } from './store.js';
import { clock } from './format.js';
import { refreshSharing } from './friends-map-sync.js';

const HEARTBEAT = 10000;

export class WalkerMode {
  constructor(app) {
    this.app = app;
    this.watchId = null;
    this.unsent = null; // the newest fix taken while offline, sent on reconnect
    this.geoError = null;
    app.socket.addEventListener('state', () => {
      if (app.socket.isOpen && this.unsent) this.sendPosition(this.unsent);
    });
    let sharedAlways = false;
    app.state.addEventListener('changed', (event) => {
      if (event.detail !== 'sharing') return;
      const was = sharedAlways;
      sharedAlways = this.sharingAlways();
      if (sharedAlways) this.watch();
      else if (was) this.ended(); // stopped sharing at all times: the watch stops unless a walk or alarm needs it
    });
  }

  /** Whether some friends get our positions at all times (share.always). */
  sharingAlways() {
    return this.app.state.sharing.with.length > 0;
  }

  get walk() {
    return this.app.state.own;
  }

  /** After sign-in: an active own session (another tab, a reload) resumes sending positions. */
  resume() {
    if (this.walk && !this.walk.ended) this.watch();
  }

  async start(fields) {
    const reply = await this.app.socket.request('session.start', fields);
    this.app.state.own = new Walk(reply.session);
    // The fix taken while the form was open is the walk's first position.
    if (this.lastFix) {
      this.app.state.own.add(this.lastFix);
      this.sendPosition(this.lastFix);
    }
    this.app.state.changed('own');
    this.watch();
  }

  watch() {
    if (this.watchId !== null) return;
    if (!navigator.geolocation) {
      this.geoError = 'This browser cannot share its location.';
      return;
    }
    this.startWatch();
    // watchPosition reports only movement: a walker standing still would look to followers like a phone
    // gone quiet, and some browsers let a watch stall. After HEARTBEAT without a fix the watch is
    // started again, which delivers the current position at once.
    this.heartbeat = setInterval(() => {
      if (Date.now() - (this.lastFixAt || 0) < HEARTBEAT) return;
      navigator.geolocation.clearWatch(this.watchId);
      this.startWatch();
    }, HEARTBEAT / 2);
  }

  startWatch() {
    this.watchId = navigator.geolocation.watchPosition(
      (fix) => this.took(fix),
      (error) => {
        if (error.code !== error.PERMISSION_DENIED && this.lastFixAt) return; // a gap; the heartbeat restarts the watch
        this.geoError = error.code === error.PERMISSION_DENIED
          ? 'Location is blocked: allow it for this site so your friends can see where you are.'
          : 'Waiting for a location fix…';
        this.app.state.changed('own');
      },
      { enableHighAccuracy: true, maximumAge: 0, timeout: 30000 });
  }

  took(fix) {
    this.geoError = null;
    this.lastFixAt = Date.now();
    const c = fix.coords;
    const pos = { lat: c.latitude, lon: c.longitude, ts: Math.round(fix.timestamp || Date.now()) };
    if (Number.isFinite(c.accuracy)) pos.acc = Math.max(0, c.accuracy);
    if (Number.isFinite(c.speed) && c.speed >= 0) pos.spd = c.speed;
    if (Number.isFinite(c.heading) && c.heading >= 0 && c.heading < 360) pos.hdg = c.heading;
    if (this.walk && !this.walk.ended) this.walk.add(pos);
    this.lastFix = pos;
    this.sendPosition(pos);
    this.app.state.changed('own');
  }

  sendPosition(pos) {
    const sharing = (this.walk && !this.walk.ended) || this.ownAlarm() || this.sharingAlways();
    if (!sharing) return;
    this.unsent = this.app.socket.send('pos', pos) ? null : pos;
  }

  ownAlarm() {
    const me = this.app.state.me?.username;
    return [...this.app.state.alarms.values()].find((a) => a.from.username === me) || null;
  }

  stop() {
    if (this.watchId !== null) navigator.geolocation.clearWatch(this.watchId);
    clearInterval(this.heartbeat);
    this.watchId = null;
  }

  /** The walk or the alarm ended: the location watch stops unless something else still needs it. */
  ended() {
    if (!this.ownAlarm() && !this.sharingAlways() && !(this.walk && !this.walk.ended)) this.stop();
  }

  async end() {
    const walk = this.walk;
    await this.app.socket.request('session.end', { sessionId: walk.session.sessionId });
    walk.ended = 'ended';
    this.ended();
    this.app.state.changed('own');
  }

  async checkIn(minutes) {
    const fields = { sessionId: this.walk.session.sessionId };
    if (minutes > 0) fields.checkInBy = Date.now() + minutes * 60000;
    const reply = await this.app.socket.request('session.checkin', fields);
    if (reply.session) this.walk.session = reply.session;
    else delete this.walk.session.checkInBy;
    this.app.state.changed('own');
  }

  async panic(text) {
    const fields = {};
    if (text) fields.text = text;
    const fix = this.lastFix;
    if (fix) Object.assign(fields, { lat: fix.lat, lon: fix.lon }, typeof fix.acc === 'number' ? { acc: fix.acc } : {});
    const reply = await this.app.socket.request('alarm.raise', fields);
    this.app.state.alarms.set(reply.alarm.alarmId, reply.alarm);
    this.app.state.changed('alarms');
    refreshSharing(this.app);
    this.watch();
    return reply;
  }

  async cancelAlarm(alarm) {
    await this.app.socket.request('alarm.cancel', { alarmId: alarm.alarmId, reason: 'I am safe' });
    this.app.state.alarms.delete(alarm.alarmId);
    this.app.state.changed('alarms');
    refreshSharing(this.app);
    this.ended();
  }
}

export function renderWalker(app, main) {
  const { state } = app;
  const mode = app.walker;
  const body = h('div', { id: 'walker' });
  const mapBox = h('div', { class: 'map', id: 'own-map' });
  const panicButton = h('button', { type: 'button', class: 'panic', id: 'panic', onclick: confirmPanic }, 'PANIC');
  mount(main,
    h('header', { class: 'top' },
      h('button', { type: 'button', class: 'link', onclick: () => app.show({ name: 'home' }) }, '‹ Back'),
      h('h1', {}, 'My walk')),
    mapBox, body, panicButton);

  let map = null;
  let disposed = false;
  app.mapSupport.then((support) => {
    if (disposed) return;
    map = new WalkMap(mapBox, support);
    syncMap();
  });

  function syncMap() {
    if (!map) return;
    const walk = mode.walk;
    if (walk) {
      map.setDestination(walk.session.destination);
      for (const p of walk.track.slice(map.track.length)) map.addPosition(p);
    } else if (mode.lastFix) {
      map.addPosition(mode.lastFix);
    }
  }

  const act = (promise) => promise.catch((error) => app.reportError(error));

  function draw() {
    const walk = mode.walk;
    const alarm = mode.ownAlarm();
    const parts = [];
    if (alarm) {
      parts.push(h('div', { class: 'banner alarm-own', id: 'own-alarm' },
        h('p', {}, `Alarm sent at ${clock(alarm.createdAt)}.`),
        h('p', { id: 'own-alarm-acks' }, alarm.acked.length ? `On it: ${alarm.acked.join(', ')}` : 'Nobody has answered yet.'),
        h('button', { type: 'button', onclick: () => act(mode.cancelAlarm(alarm)) }, 'Cancel alarm: I am safe')));
    }
    if (mode.geoError) parts.push(h('p', { class: 'banner lost', id: 'geo-error' }, mode.geoError));
    if (!walk || walk.ended) {
      if (walk && walk.ended) parts.push(h('p', { class: 'banner ended' }, endingText(walk.ended)));
      parts.push(startForm());
    } else {
      const session = walk.session;
      parts.push(h('p', { id: 'sharing-with' }, session.observers.length
        ? `Followed by ${session.observers.join(', ')}`
        : `Invited: ${session.invited.join(', ') || 'nobody yet'}; waiting for someone to follow.`));
      parts.push(walkFacts(walk));
      if (state.features.includes('share')) parts.push(shareLinkBox(walk));
      parts.push(h('div', { class: 'actions' },
        h('button', { type: 'button', id: 'check-in', onclick: () => act(mode.checkIn(15)) }, 'Check in (15 min)'),
        h('button', { type: 'button', class: 'primary', id: 'end-walk', onclick: () => act(mode.end()) }, "I'm home")));
    }
    mount(body, parts);
    syncMap();
  }

  // A link for someone without an account (protocol 1.1 share links): shown once, as the relay keeps
  // only a hash of its token. Made once per walk, so redraws keep it.
  let shareBox = null;
  function shareLinkBox(walk) {
    if (shareBox && shareBox.dataset.session === walk.session.sessionId) return shareBox;
    const result = h('div', { class: 'share-result' });
    shareBox = h('div', { class: 'card share-link', dataset: { session: walk.session.sessionId } },
      h('p', { class: 'muted' }, 'Someone without an account can watch this walk with a link (valid 2 hours).'),
      h('button', { type: 'button', id: 'create-share-link', onclick: () => act(create()) }, 'Create a share link'),
      result);
    async function create() {
      const reply = await app.socket.request('share.create', { sessionId: walk.session.sessionId });
      const field = h('input', { readonly: true, id: 'share-url', value: reply.share.url, 'aria-label': 'share link' });
      const copy = h('button', { type: 'button', onclick: async () => {
        try {
          await navigator.clipboard.writeText(reply.share.url);
          app.notify('Link copied');
        } catch {
          field.select();
        }
      } }, 'Copy');
      mount(result, h('div', { class: 'inline' }, field, copy), h('p', { class: 'muted small' }, 'Send it yourself; it is shown only now.'));
    }
    return shareBox;
  }

  // Made once, so that a new location fix redrawing the screen keeps what the user typed.
  let startFormElement = null;
  function startForm() {
    if (startFormElement) return startFormElement;
    const form = startFormElement = h('form', { class: 'card', id: 'start-walk', onsubmit: (event) => { event.preventDefault(); act(submit(form)); } },
      h('h2', {}, 'Share my walk'),
      h('p', { class: 'muted' }, 'All your friends are invited; they see your position until you end the walk.'),
      h('label', {}, 'Note (optional)', h('input', { name: 'note', maxlength: 280, placeholder: 'Walking home from the station' })),
      h('label', {}, 'Check in within (minutes, optional)', h('input', { name: 'checkin', type: 'number', min: 1, max: 10080, inputmode: 'numeric' })),
      h('label', {}, 'Destination (lat, lon; optional)', h('input', { name: 'destination', placeholder: '57.7089, 11.9746', inputmode: 'decimal' })),
      h('button', { type: 'submit', class: 'primary', id: 'start-sharing' }, 'Start sharing'));
    return form;
  }

  async function submit(form) {
    const values = formValues(form);
    const fields = {};
    if (values.note) fields.note = values.note;
    if (values.checkin) fields.checkInBy = Date.now() + Number(values.checkin) * 60000;
    if (values.destination) {
      const [lat, lon] = values.destination.split(',').map((s) => Number(s.trim()));
      if (!Number.isFinite(lat) || !Number.isFinite(lon)) throw new Error('Destination: two numbers, latitude and longitude');
      fields.destination = { lat, lon, radius: 50 };
    }
    await mode.start(fields);
  }

  function confirmPanic() {
    const dialog = h('div', { class: 'modal', role: 'alertdialog', 'aria-labelledby': 'panic-title', id: 'panic-confirm' },
      h('div', { class: 'card' },
        h('h2', { id: 'panic-title' }, 'Send an alarm?'),
        h('p', {}, 'Your friends get an alarm with your position at once.'),
        h('label', {}, 'Message (optional)', h('input', { name: 'text', maxlength: 500, id: 'panic-text' })),
        h('div', { class: 'actions' },
          h('button', { type: 'button', class: 'panic', id: 'panic-send', onclick: send }, 'Send alarm'),
          h('button', { type: 'button', id: 'panic-cancel', onclick: () => dialog.remove() }, 'Cancel'))));
    async function send() {
      const text = dialog.querySelector('#panic-text').value.trim();
      dialog.remove();
      try {
        const reply = await mode.panic(text);
        app.notify(`Alarm sent to ${reply.recipients.map((r) => r.username).join(', ')}`);
      } catch (error) {
        app.reportError(error);
      }
    }
    document.body.append(dialog);
    dialog.querySelector('#panic-send').focus();
  }

  const onChange = (event) => {
    if (event.detail === 'own' || event.detail === 'alarms' || event.detail === 'sessions') draw();
  };
  state.addEventListener('changed', onChange);
  mode.watch();
  draw();
  return () => {
    disposed = true;
    state.removeEventListener('changed', onChange);
    if (map) map.destroy();
  };
}
