// The facts under a walk's map, shared by the app and the share-link viewer: last fix and its age,
// accuracy, distance to the destination, the check-in countdown, lost contact, the end.

import { h, agoText, countdownText } from './dom.js';
import { clock, coordinates, distance, metresBetween } from './format.js';
import { trailNotice } from './walk-trail.js';

const endings = {
  ended: 'The walk has ended.',
  arrived: 'Arrived at the destination.',
  expired: 'The walk has ended (its time ran out).',
  revoked: 'The owner stopped sharing this walk.',
  unfriended: 'The walk is no longer shared with you.',
};

export function endingText(reason) {
  return endings[reason] || `The walk has ended (${reason}).`;
}

export function walkFacts(walk) {
  const { session, last, lost, ended } = walk;
  const rows = [];
  if (ended) rows.push(h('p', { class: 'banner ended', id: 'walk-ended' }, endingText(ended)));
  if (!ended) rows.push(trailNotice(walk));
  if (lost && !ended) {
    rows.push(h('p', { class: 'banner lost', id: 'contact-lost' },
      'CONTACT LOST: no connection from the phone',
      lost.since ? [' since ', clock(lost.since), ' (', agoText(lost.since), ')'] : null,
      '. The last known position is shown.'));
  }
  const facts = [];
  if (last) {
    facts.push(['Last fix', agoText(last.ts, { id: 'fix-age' })]);
    facts.push(['Position', coordinates(last)]);
    if (typeof last.acc === 'number') facts.push(['Accuracy', `± ${distance(last.acc)}`]);
    if (typeof last.batt === 'number') facts.push(['Battery', `${Math.round(last.batt)} %`]);
  } else {
    facts.push(['Last fix', 'no position yet']);
  }
  if (session.destination) {
    facts.push(['Destination', last ? `${distance(metresBetween(last, session.destination))} away` : coordinates(session.destination)]);
  }
  if (session.checkInBy && !ended) {
    facts.push(['Check-in due', countdownText(session.checkInBy, { id: 'checkin-countdown' })]);
  }
  if (session.startedAt) facts.push(['Started', clock(session.startedAt)]);
  if (session.expiresAt) facts.push(['Shared until', clock(session.expiresAt)]);
  rows.push(h('dl', { class: 'facts' }, facts.map(([k, v]) => [h('dt', {}, k), h('dd', {}, v)])));
  return rows;
}
