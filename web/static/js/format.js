// How times and distances read on a phone screen.

/** "12 s ago", "4 min ago", "2 h ago"; "just now" under 2 s (clock skew never gives "in 3 s"). */
export function ago(ts, now = Date.now()) {
  if (!ts) return 'never';
  const s = Math.max(0, Math.round((now - ts) / 1000));
  if (s < 2) return 'just now';
  if (s < 90) return `${s} s ago`;
  const m = Math.round(s / 60);
  if (m < 90) return `${m} min ago`;
  const hours = Math.round(m / 60);
  if (hours < 36) return `${hours} h ago`;
  return `${Math.round(hours / 24)} d ago`;
}

/** "in 14:05" for a deadline, "overdue by 0:42" after it. */
export function countdown(deadline, now = Date.now()) {
  const overdue = now > deadline;
  let s = Math.round(Math.abs(deadline - now) / 1000);
  const hours = Math.floor(s / 3600);
  s -= hours * 3600;
  const m = Math.floor(s / 60);
  const sec = String(s % 60).padStart(2, '0');
  const text = hours > 0 ? `${hours}:${String(m).padStart(2, '0')}:${sec}` : `${m}:${sec}`;
  return overdue ? `overdue by ${text}` : `in ${text}`;
}

export function clock(ts) {
  return new Date(ts).toLocaleTimeString([], { hour: '2-digit', minute: '2-digit' });
}

export function distance(metres) {
  return metres >= 1000 ? `${(metres / 1000).toFixed(metres >= 10000 ? 0 : 1)} km` : `${Math.round(metres)} m`;
}

export function coordinates(pos) {
  return `${pos.lat.toFixed(5)}, ${pos.lon.toFixed(5)}`;
}

/** Great-circle distance in metres. */
export function metresBetween(a, b) {
  const rad = Math.PI / 180;
  const dLat = (b.lat - a.lat) * rad;
  const dLon = (b.lon - a.lon) * rad;
  const x = Math.sin(dLat / 2) ** 2 + Math.cos(a.lat * rad) * Math.cos(b.lat * rad) * Math.sin(dLon / 2) ** 2;
  return 2 * 6371008.8 * Math.asin(Math.min(1, Math.sqrt(x)));
}

export function displayName(user) {
  if (!user) return '';
  return user.name && user.name !== user.username ? `${user.name} (@${user.username})` : `@${user.username}`;
}

/** Rewrites every "12 s ago" ([data-ago]) and countdown ([data-countdown]) under `root`; called once a second. */
export function refreshTimes(root = document, now = Date.now()) {
  for (const el of root.querySelectorAll('[data-ago]')) el.textContent = ago(Number(el.dataset.ago), now);
  for (const el of root.querySelectorAll('[data-countdown]')) {
    const deadline = Number(el.dataset.countdown);
    el.textContent = countdown(deadline, now);
    el.classList.toggle('overdue', now > deadline);
  }
}

/** "22:30" today, "Thu 26 Nov 22:30" on another day. */
export function when(ts, now = Date.now()) {
  const date = new Date(ts);
  if (date.toDateString() === new Date(now).toDateString()) return clock(ts);
  return `${date.toLocaleDateString([], { weekday: 'short', day: 'numeric', month: 'short' })} ${clock(ts)}`;
}

/** The value a datetime-local input shows for `ts`, in local time ("2026-11-25T22:30"). */
export function localInputValue(ts) {
  const d = new Date(ts);
  const pad = (n) => String(n).padStart(2, '0');
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())}T${pad(d.getHours())}:${pad(d.getMinutes())}`;
}
