// The app's service worker, served at /sw.js so that its scope is the whole app (`/`). It only shows
// notifications: a Web Push from the relay carries the same JSON as the WebSocket event (protocol 1.1
// "push"), and this turns it into a notification even when no tab of the app is open. Clicking one
// focuses an open app window (and tells it which alarm to show) or opens `/#alarm=ID`.
//
// No fetch handler: the app is never served from a cache, so what the page runs is what the relay
// serves. A classic script (not a module) so that every browser with Web Push can run it.
// `self.homeward` exposes the handlers so that the browser tests can drive them without a push service.

'use strict';

const ICON = '/static/icon.svg';

/** Who a user object names: "Ann" or "@ann". */
function nameOf(user) {
  if (!user || typeof user !== 'object') return 'Someone';
  return user.name || (user.username ? `@${user.username}` : 'Someone');
}

/** The URL of the app that shows the alarm `alarmId` (app.js reads the fragment after sign-in). */
function alarmURL(alarmId) {
  return `/#alarm=${encodeURIComponent(alarmId)}`;
}

/**
 * The notification for one relay event: `{title, options}`. An alarm is urgent (it stays until
 * answered, vibrates, and its tag is the alarm id, so a repeat replaces the one notification and
 * alerts again); its `alarm.cancelled` takes the same tag, so it replaces the alarm's notification
 * quietly; the rest are short notes that open the app. A push too long for one message arrives
 * shortened (`invitedMore`, `textTruncated`, `truncated`); the app shows the whole when opened.
 */
function notificationFor(message) {
  const type = message && typeof message === 'object' ? message.type : undefined;
  switch (type) {
    case 'alarm': {
      const alarm = message.alarm || {};
      const position = alarm.position && typeof alarm.position.lat === 'number'
        ? `\nPosition ${alarm.position.lat.toFixed(5)}, ${alarm.position.lon.toFixed(5)}` : '';
      const repeat = message.repeat ? `\nStill unanswered (reminder ${message.repeat})` : '';
      return {
        title: alarm.auto ? `ALARM: ${nameOf(alarm.from)} missed a check-in` : `ALARM: ${nameOf(alarm.from)} needs help`,
        options: {
          body: `${alarm.text || 'Needs help now.'}${position}${repeat}`,
          tag: String(alarm.alarmId || 'alarm'),
          renotify: true,
          requireInteraction: true,
          vibrate: [400, 200, 400, 200, 400],
          icon: ICON,
          timestamp: alarm.createdAt,
          data: { url: alarmURL(alarm.alarmId || ''), alarmId: alarm.alarmId },
        },
      };
    }
    case 'alarm.cancelled': {
      // Same tag as the alarm: this replaces its notification (no sound, nothing left to answer).
      const reason = typeof message.reason === 'string' && message.reason && message.reason !== 'cancelled'
        ? `: ${message.reason}` : '';
      return {
        title: 'Alarm over',
        options: {
          body: `The alarm was called off${reason}.`,
          tag: String(message.alarmId || 'alarm'),
          renotify: false,
          requireInteraction: false,
          icon: ICON,
          data: { url: alarmURL(message.alarmId || ''), alarmId: message.alarmId },
        },
      };
    }
    case 'session.invite': {
      const session = message.session || {};
      return {
        title: `${nameOf(session.owner)} asks you to follow their walk`,
        options: { body: session.note || 'Open Homeward to follow.', tag: `invite:${session.sessionId}`, icon: ICON, data: { url: '/' } },
      };
    }
    case 'session.lost':
      return {
        title: 'Contact lost',
        options: { body: 'A walk you follow has gone quiet. Open Homeward to see the last position.', tag: `lost:${message.sessionId}`, icon: ICON, data: { url: '/' } },
      };
    case 'friend.request':
      return {
        title: `${nameOf(message.from)} wants to be your friend`,
        options: { body: 'Open Homeward to answer.', tag: `friend:${message.from && message.from.username}`, icon: ICON, data: { url: '/' } },
      };
    default:
      // A push must show something (userVisibleOnly); an event this version does not know opens the app.
      return { title: 'Homeward', options: { body: 'Something new: open Homeward.', tag: 'homeward', icon: ICON, data: { url: '/' } } };
  }
}

/** The event's payload as an object; null when it has none or it is not JSON. */
function payloadOf(event) {
  if (!event || !event.data) return null;
  try {
    return event.data.json();
  } catch {
    return null;
  }
}

/** The `push` handler: one notification per event. */
function handlePush(event) {
  const { title, options } = notificationFor(payloadOf(event));
  return self.registration.showNotification(title, options);
}

/**
 * The `notificationclick` handler: an open app window is focused and told which alarm to show (a
 * message, so the page keeps its connection and state); with none, the app opens at the alarm view.
 */
async function handleNotificationClick(event) {
  event.notification.close();
  const data = event.notification.data || {};
  const windows = await self.clients.matchAll({ type: 'window', includeUncontrolled: true });
  const app = windows.find((client) => new URL(client.url).pathname === '/');
  if (app) {
    if (data.alarmId) app.postMessage({ type: 'homeward.open-alarm', alarmId: data.alarmId });
    return app.focus().catch(() => app); // focusing may be refused (the window is closing): the message is sent
  }
  return self.clients.openWindow(data.url || '/');
}

self.addEventListener('install', () => self.skipWaiting());
self.addEventListener('activate', (event) => event.waitUntil(self.clients.claim()));
self.addEventListener('push', (event) => event.waitUntil(handlePush(event)));
self.addEventListener('notificationclick', (event) => event.waitUntil(handleNotificationClick(event)));

self.homeward = { notificationFor, handlePush, handleNotificationClick };
