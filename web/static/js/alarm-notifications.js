// Alarm notifications: the service worker (/sw.js) plus a Web Push subscription made with the
// relay's VAPID key, so that an alarm reaches this browser while no tab of the app is open.
//
// The worker (it shows notifications and nothing else) is registered only when the person turns
// notifications on, and unregistered when they turn them off: a browser that never asked for
// notifications runs no worker of this app. Subscribing needs a tap (browsers ask for the
// Notification permission only on a user gesture) and a push service: a browser without one
// (headless, offline, or one that blocks it) says why, and the app carries on without push.
// Signing out turns it off, so the next account on this browser does not get the last one's alarms.

import { RelayError } from './relay.js';

const WORKER = '/sw.js';

/** `'unsupported' | 'blocked' | 'off' | 'on' | 'working' | 'failed'`, with a text for the last. */
export class AlarmNotifications extends EventTarget {
  constructor(app) {
    super();
    this.app = app;
    this.status = 'off';
    this.detail = '';
    this.supported = 'serviceWorker' in navigator && 'PushManager' in window && 'Notification' in window;
    if (this.supported) {
      navigator.serviceWorker.addEventListener('message', (event) => {
        if (event.data && event.data.type === 'homeward.open-alarm') app.openAlarm(String(event.data.alarmId));
      });
      navigator.serviceWorker.startMessages(); // an addEventListener alone leaves the messages queued

    }
  }

  set(status, detail = '') {
    this.status = status;
    this.detail = detail;
    this.dispatchEvent(new CustomEvent('changed'));
  }

  /** The worker's registration made by an earlier "Turn on", or null. */
  async existing() {
    if (!this.supported) return null;
    try {
      return (await navigator.serviceWorker.getRegistration('/')) || null;
    } catch {
      return null;
    }
  }

  /** Registers the worker (on a tap on "Turn on"); null with the reason shown when it cannot start. */
  async register() {
    try {
      return await navigator.serviceWorker.register(WORKER, { scope: '/' });
    } catch (error) {
      this.set('unsupported', `the service worker did not start: ${error.message}`);
      return null;
    }
  }

  /** The relay's key, or null when it offers no push. */
  get key() {
    const { state } = this.app;
    return state.features.includes('push') && state.vapidPublicKey ? state.vapidPublicKey : null;
  }

  /** After sign-in: the current state, and a subscription this browser already has handed to the relay again. */
  async refresh() {
    if (!this.supported) return this.set('unsupported', this.detail || 'this browser has no Web Push');
    if (!this.key) return this.set('unsupported', 'this relay does not send push notifications');
    if (Notification.permission === 'denied') return this.set('blocked');
    const registration = await this.existing();
    if (!registration) return this.set('off');
    try {
      const subscription = await registration.pushManager.getSubscription();
      if (!subscription || Notification.permission !== 'granted') return this.set('off');
      await this.hand(subscription);
      this.set('on');
    } catch (error) {
      this.failed(error);
    }
  }

  /** On a tap: ask the permission, subscribe with the relay's key, and tell the relay. */
  async turnOn() {
    this.set('working');
    try {
      const permission = await Notification.requestPermission();
      if (permission === 'denied') return this.set('blocked');
      if (permission !== 'granted') return this.set('off', 'permission not given');
      const registration = await this.register();
      if (!registration) return null;
      await navigator.serviceWorker.ready;
      let subscription = await registration.pushManager.getSubscription();
      if (subscription && !sameKey(subscription, this.key)) {
        await subscription.unsubscribe(); // made with another relay key: the push service would refuse ours
        subscription = null;
      }
      subscription = subscription || await registration.pushManager.subscribe({
        userVisibleOnly: true, applicationServerKey: base64urlBytes(this.key),
      });
      await this.hand(subscription);
      this.set('on');
    } catch (error) {
      this.failed(error);
    }
  }

  /** At sign-out: off, if a worker is registered at all (also one whose subscribe failed). */
  async turnOffAtSignOut() {
    if (this.status === 'on' || await this.existing()) await this.turnOff();
  }

  /** On a tap, and at sign-out: the relay forgets the subscription, the browser drops it and the worker. */
  async turnOff() {
    this.set('working');
    try {
      const registration = await this.existing();
      const subscription = registration && await registration.pushManager.getSubscription();
      if (subscription) {
        await this.forget(subscription.endpoint);
        await subscription.unsubscribe();
      }
      if (registration) await registration.unregister();
      this.set('off');
    } catch (error) {
      this.failed(error);
    }
  }

  async hand(subscription) {
    const { endpoint, keys } = subscription.toJSON();
    await this.app.socket.request('push.subscribe', { kind: 'webpush', endpoint, keys });
  }

  async forget(endpoint) {
    const { subscriptions } = await this.app.socket.request('push.list');
    for (const known of subscriptions.filter((s) => s.endpoint === endpoint)) {
      await this.app.socket.request('push.unsubscribe', { subscriptionId: known.subscriptionId });
    }
  }

  failed(error) {
    if (error instanceof RelayError) {
      this.set('failed', error.code === 'offline' ? 'you are offline' : `the relay refused it: ${error.message}`);
    } else if (error && (error.name === 'AbortError' || error.name === 'NotSupportedError' || error.name === 'NotAllowedError')) {
      this.set('unsupported', `no push service here (${error.message || error.name})`);
    } else {
      this.set('failed', String(error && error.message ? error.message : error));
    }
  }
}

function sameKey(subscription, key) {
  const current = subscription.options && subscription.options.applicationServerKey;
  if (!current) return true;
  const wanted = base64urlBytes(key);
  const have = new Uint8Array(current);
  return have.length === wanted.length && have.every((byte, i) => byte === wanted[i]);
}

function base64urlBytes(text) {
  const base64 = text.replace(/-/g, '+').replace(/_/g, '/') + '='.repeat((4 - (text.length % 4)) % 4);
  return Uint8Array.from(atob(base64), (c) => c.charCodeAt(0));
}
