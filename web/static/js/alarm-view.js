// An alarm takes over the screen: who, what, where (a map), when, who is already on it, and
// "I'm on it" (alarm.ack). It beeps where the browser allows sound and vibrates where it can. After
// answering, "Close" returns to the app; the alarm stays as a banner on the home screen until it is
// cancelled.

import { h, mount, agoText } from './dom.js';
import { WalkMap } from './walk-map.js';
import { clock, coordinates, distance } from './format.js';
import { startAlarmSound, stopAlarmSound, vibrate } from './sound.js';

export class AlarmOverlay {
  constructor(app, layer) {
    this.app = app;
    this.layer = layer;
    this.dismissed = new Set();
    this.shownId = null;
    this.map = null;
    this.seen = new Set();
    app.state.addEventListener('changed', (event) => {
      if (event.detail === 'alarms') this.update();
    });
  }

  /** Alarms from others that the user has not closed yet, newest first. */
  pending() {
    const me = this.app.state.me?.username;
    return [...this.app.state.alarms.values()]
      .filter((a) => a.from.username !== me && !this.dismissed.has(a.alarmId))
      .sort((a, b) => b.createdAt - a.createdAt);
  }

  open(alarmId) {
    this.dismissed.delete(alarmId);
    this.update(alarmId);
  }

  update(preferred) {
    const pending = this.pending();
    const alarm = pending.find((a) => a.alarmId === preferred) || pending.find((a) => a.alarmId === this.shownId) || pending[0];
    if (!alarm) {
      this.close();
      return;
    }
    const me = this.app.state.me?.username;
    const answered = alarm.acked.includes(me);
    if (!answered) {
      startAlarmSound();
      if (!this.seen.has(alarm.alarmId)) vibrate();
    } else {
      stopAlarmSound();
    }
    this.seen.add(alarm.alarmId);
    if (this.shownId !== alarm.alarmId) this.build(alarm);
    this.fill(alarm, answered);
  }

  build(alarm) {
    this.destroyMap();
    this.shownId = alarm.alarmId;
    this.details = h('div', { class: 'alarm-details' });
    this.mapBox = h('div', { class: 'map small', id: 'alarm-map' });
    this.button = h('button', { type: 'button', class: 'ack', id: 'alarm-ack' });
    this.element = h('div', { class: 'alarm-overlay', role: 'alertdialog', 'aria-labelledby': 'alarm-title', id: 'alarm-overlay', dataset: { alarm: alarm.alarmId } },
      h('h1', { id: 'alarm-title' }, 'ALARM'),
      this.details, this.mapBox, this.button);
    mount(this.layer, this.element);
    document.body.classList.add('alarm-active');
    this.app.mapSupport.then((support) => {
      if (this.shownId !== alarm.alarmId) return;
      this.map = new WalkMap(this.mapBox, support);
      if (alarm.position) this.map.addPosition(alarm.position);
      this.showTrail(alarm);
    });
  }

  fill(alarm, answered) {
    const from = alarm.from.name || alarm.from.username;
    const pos = alarm.position;
    if (this.map && pos) this.map.addPosition(pos);
    mount(this.details,
      h('p', { class: 'who' }, `${from} needs help`),
      h('p', { class: 'text', id: 'alarm-text' }, alarm.text),
      alarm.auto ? h('p', { class: 'muted' }, 'Raised by the relay: a check-in was missed.') : null,
      h('p', {}, `Raised at ${clock(alarm.createdAt)} (`, agoText(alarm.createdAt), ')'),
      pos ? h('p', { id: 'alarm-position' }, `Position ${coordinates(pos)}`, typeof pos.acc === 'number' ? ` ± ${distance(pos.acc)}` : '',
        ', fix ', agoText(pos.ts)) : h('p', {}, 'No position was sent with the alarm.'),
      h('p', { id: 'alarm-acks' }, alarm.acked.length ? `On it: ${alarm.acked.join(', ')}` : 'Nobody has answered yet.'));
    this.button.textContent = answered ? 'Close' : "I'm on it";
    this.button.onclick = answered ? () => this.dismiss(alarm.alarmId) : () => this.acknowledge(alarm);
  }

  async acknowledge(alarm) {
    this.button.disabled = true;
    try {
      await this.app.socket.request('alarm.ack', { alarmId: alarm.alarmId });
      const me = this.app.state.me.username;
      if (!alarm.acked.includes(me)) alarm.acked = [...alarm.acked, me];
      this.app.state.changed('alarms');
    } catch (error) {
      this.app.reportError(error);
    } finally {
      this.button.disabled = false;
    }
  }

  dismiss(alarmId) {
    this.dismissed.add(alarmId);
    this.update();
  }

  /** The path of the walk the alarm's sender is on, if any (feature "trail"): drawn under the position. */
  async showTrail(alarm) {
    if (!this.app.state.features.includes('trail')) return;
    let reply;
    try {
      reply = await this.app.socket.request('friend.trail', { username: alarm.from.username });
    } catch {
      return; // the alarm ended meanwhile, or the connection dropped: the position alone stays
    }
    if (!reply.trail || !this.map || this.shownId !== alarm.alarmId) return;
    const points = reply.trail.points.map(([lat, lon, ts]) => ({ lat, lon, ts }));
    const latest = alarm.position && (!points.length || alarm.position.ts > points[points.length - 1].ts) ? [alarm.position] : [];
    this.map.setTrack([...points, ...latest]);
  }

  destroyMap() {
    if (this.map) this.map.destroy();
    this.map = null;
  }

  close() {
    stopAlarmSound();
    this.destroyMap();
    this.shownId = null;
    this.layer.replaceChildren();
    document.body.classList.remove('alarm-active');
  }
}
