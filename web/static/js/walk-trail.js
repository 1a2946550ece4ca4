// The walk's trail (relay feature "trail"): the path the relay kept of an active walk, given to whoever
// starts seeing it (the accept reply, the watch reply, `friend.trail`). The relay keeps it in memory only,
// so after a relay restart it starts again: `since` then lies after the walk's start, and the page says so
// instead of passing a shorter path off as the whole walk. Points are [lat, lon, ts], oldest first.

import { h } from './dom.js';
import { clock } from './format.js';

// A trail recorded from within this long of the walk's start counts as the whole walk (both times are the
// relay's clock; between them lies only the storing of the walk's start).
const START_SLACK_MS = 2000;

// When each live position reached the page, to tell those that came while the trail was asked for from
// older ones the trail replaces.
const seenAt = new WeakMap();

/** Notes that the page received `position` now. */
export function markSeen(position) {
  seenAt.set(position, performance.now());
}

/** The time to pass to `mergeTrail` for a trail about to be asked for. */
export function askedNow() {
  return performance.now();
}

/** The trail's points as positions, or null when `trail` is not one of `session`. */
export function trailPositions(trail, session) {
  if (!trail || !Array.isArray(trail.points) || trail.sessionId !== session.sessionId) return null;
  return trail.points
    .filter((p) => Array.isArray(p) && typeof p[0] === 'number' && typeof p[1] === 'number')
    .map(([lat, lon, ts]) => ({ lat, lon, ts }));
}

/**
 * The track to draw: the relay's trail, then the positions that reached the page since it was asked for
 * (`askedAt`) and are newer than its last point. What was drawn before is replaced, never kept: after a
 * relay restart it is no longer the relay's record.
 */
export function mergeTrail(points, live, askedAt) {
  const lastTs = points.length ? points[points.length - 1].ts : -Infinity;
  return [...points, ...live.filter((p) => p.ts > lastTs && (seenAt.get(p) ?? -Infinity) >= askedAt)];
}

/** When the trail starts later than the walk: from when it is shown (ms), else null. */
export function trailStartsLate(trail, session) {
  if (!trail || typeof trail.since !== 'number' || typeof session.startedAt !== 'number') return null;
  return trail.since > session.startedAt + START_SLACK_MS ? trail.since : null;
}

/** The line under a walk's map that says the path starts late, or null. */
export function trailNotice(walk) {
  if (!walk.trailSince) return null;
  return h('p', { class: 'banner trail-restarted', id: 'trail-restarted', role: 'note' },
    `Path shown from ${clock(walk.trailSince)} only: the relay restarted during the walk and kept nothing from before.`);
}

/**
 * After every sign-in (the first, and each reconnect): the relay's trail of each walk the user follows,
 * so that a path drawn before a relay restart is replaced by what the relay has now.
 */
export async function loadTrails(app) {
  const { state, socket } = app;
  if (!state.features.includes('trail')) return;
  await Promise.all([...state.following.values()].filter((walk) => !walk.ended).map(async (walk) => {
    const askedAt = askedNow();
    try {
      const reply = await socket.request('friend.trail', { username: walk.session.owner.username });
      walk.setTrail(reply.trail, askedAt);
      state.changed(`position:${walk.session.sessionId}`);
    } catch {
      // forbidden (a pause hides the walker now) or offline: the track stays as it is.
    }
  }));
}
