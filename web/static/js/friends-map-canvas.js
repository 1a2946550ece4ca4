// The friends' map itself: a dot and a name for each friend who shares with us, a pin for each
// meeting point, and a tap anywhere to pick a place (for a new meeting point). Drawn with Leaflet
// when the relay serves it, otherwise as SVG in a local flat projection fitted to what is shown.
// Names go in as text nodes (Leaflet tooltips get an element, never an HTML string).
//
// The container's data attributes (data-renderer, data-friends, data-meetings) say what is drawn.

import { h } from './dom.js';
import { PlainStreets, streetLayer } from './street-tiles.js';

const SVG = 'http://www.w3.org/2000/svg';
const EARTH = 6371008.8;

export class FriendsMapCanvas {
  /** `onSelect(username)`: a friend's dot was tapped; `onPick({lat, lon})`: an empty spot was tapped. */
  constructor(container, support, { onSelect, onPick }) {
    this.container = container;
    this.canvas = h('div', { class: 'map-canvas' });
    container.replaceChildren(this.canvas);
    container.classList.add('friends-map');
    this.renderer = support.leaflet ? new LeafletLayer(this.canvas, support, onSelect, onPick) : new SvgLayer(this.canvas, onSelect, onPick, support.vectorTiles);
    container.dataset.renderer = support.leaflet ? (support.tiles ? 'leaflet-tiles' : support.vectorTiles ? 'leaflet-streets' : 'leaflet') : 'plain';
  }

  /** friends: [{username, name, position}], meetings: [{meetingId, name, lat, lon}], pick: {lat, lon}|null. */
  draw({ friends, meetings, pick }) {
    const placed = friends.filter((f) => f.position);
    this.renderer.draw({ friends: placed, meetings, pick });
    this.container.dataset.friends = String(placed.length);
    this.container.dataset.meetings = String(meetings.length);
  }

  refresh() {
    if (this.renderer.refresh) this.renderer.refresh();
  }

  destroy() {
    if (this.renderer.destroy) this.renderer.destroy();
    this.container.replaceChildren();
  }
}

class LeafletLayer {
  constructor(element, support, onSelect, onPick) {
    const L = support.leaflet;
    this.L = L;
    this.onSelect = onSelect;
    // No fade: a friend who stops sharing leaves the map at once, label and all.
    this.map = L.map(element, { zoomControl: true, attributionControl: Boolean(support.tiles || support.vectorTiles), fadeAnimation: false });
    if (support.tiles) {
      L.tileLayer(support.tiles.url, { attribution: support.tiles.attribution || '', maxZoom: 19, referrerPolicy: 'no-referrer' }).addTo(this.map);
    } else if (support.vectorTiles) {
      streetLayer(L, support.vectorTiles).addTo(this.map);
    } else {
      element.classList.add('no-tiles');
    }
    L.control.scale({ imperial: false }).addTo(this.map);
    this.map.setView([0, 0], 2);
    this.map.on('click', (event) => onPick({ lat: event.latlng.lat, lon: event.latlng.lng }));
    this.friends = new Map(); // username -> marker
    this.meetings = new Map(); // meetingId -> marker
    this.pick = null;
    this.fittedTo = '';
  }

  draw({ friends, meetings, pick }) {
    const L = this.L;
    sync(this.friends, friends, (f) => f.username, (f) => {
      const marker = L.circleMarker([f.position.lat, f.position.lon], { radius: 9, className: 'friend', color: '#fff', weight: 3, fillColor: '#1d3557', fillOpacity: 1, bubblingMouseEvents: false });
      marker.on('click', () => this.onSelect(f.username));
      return marker.bindTooltip(h('span', {}, f.name), { permanent: true, direction: 'top', offset: [0, -8], className: 'friend-label' }).addTo(this.map);
    }, (marker, f) => {
      marker.setLatLng([f.position.lat, f.position.lon]);
      marker.getTooltip().setContent(h('span', {}, f.name));
    });
    sync(this.meetings, meetings, (m) => m.meetingId, (m) => L.circleMarker([m.lat, m.lon], { radius: 8, className: 'meeting', color: '#fff', weight: 3, fillColor: '#e9a400', fillOpacity: 1, bubblingMouseEvents: false })
      .bindTooltip(h('span', {}, m.name), { permanent: true, direction: 'bottom', offset: [0, 8], className: 'meeting-label' }).addTo(this.map),
    (marker, m) => marker.setLatLng([m.lat, m.lon]));
    if (this.pick) this.pick.remove();
    this.pick = pick ? L.circleMarker([pick.lat, pick.lon], { radius: 10, className: 'picked', color: '#e9a400', weight: 3, dashArray: '4 4', fillOpacity: 0.2, interactive: false }).addTo(this.map) : null;
    // Fit the view when who is shown changes (not on every move, so a pan or zoom by the user stays).
    const points = [...friends.map((f) => [f.position.lat, f.position.lon]), ...meetings.map((m) => [m.lat, m.lon])];
    const key = [...friends.map((f) => f.username), ...meetings.map((m) => m.meetingId)].sort().join(',');
    if (points.length && key !== this.fittedTo) {
      this.fittedTo = key;
      this.map.fitBounds(L.latLngBounds(points), { padding: [40, 40], maxZoom: 16, animate: false });
    }
  }

  refresh() {
    this.map.invalidateSize();
  }

  destroy() {
    this.map.remove();
  }
}

/** Adds, moves and removes Leaflet layers so that `layers` matches `items`. */
function sync(layers, items, keyOf, make, move) {
  const wanted = new Set(items.map(keyOf));
  for (const [key, layer] of layers) {
    if (!wanted.has(key)) {
      layer.remove();
      layers.delete(key);
    }
  }
  for (const item of items) {
    const layer = layers.get(keyOf(item));
    if (layer) move(layer, item);
    else layers.set(keyOf(item), make(item));
  }
}

function svg(tag, attrs = {}, text) {
  const el = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) el.setAttribute(k, String(v));
  if (text !== undefined) el.textContent = text;
  return el;
}

/** Without Leaflet: SVG dots and labels, fitted to the friends and meeting points shown. */
class SvgLayer {
  constructor(element, onSelect, onPick, vectorTiles) {
    this.element = element;
    this.onSelect = onSelect;
    element.classList.add('plain-map');
    this.streets = vectorTiles ? new PlainStreets(element, vectorTiles) : null;
    this.root = svg('svg', { class: 'plain-map-svg', role: 'img', 'aria-label': 'map of your friends' });
    element.append(this.root);
    this.view = null;
    this.root.addEventListener('click', (event) => {
      if (!this.view) return;
      const box = this.root.getBoundingClientRect();
      onPick(this.view.unproject(event.clientX - box.left, event.clientY - box.top));
    });
  }

  draw({ friends, meetings, pick }) {
    this.last = { friends, meetings, pick };
    const width = this.element.clientWidth || 360;
    const height = this.element.clientHeight || 360;
    this.root.setAttribute('viewBox', `0 0 ${width} ${height}`);
    const points = [...friends.map((f) => f.position), ...meetings, ...(pick ? [pick] : [])];
    this.root.replaceChildren();
    if (!points.length) {
      this.view = null;
      return;
    }
    const lats = points.map((p) => p.lat);
    const lons = points.map((p) => p.lon);
    const centre = { lat: (Math.min(...lats) + Math.max(...lats)) / 2, lon: (Math.min(...lons) + Math.max(...lons)) / 2 };
    const cos = Math.cos((centre.lat * Math.PI) / 180);
    const rad = Math.PI / 180;
    let extent = 200;
    for (const p of points) {
      extent = Math.max(extent, Math.abs((p.lon - centre.lon) * rad * EARTH * cos), Math.abs((p.lat - centre.lat) * rad * EARTH));
    }
    const scale = (Math.min(width, height) / 2 - 40) / extent;
    if (this.streets) this.streets.draw({ width, height, centre, scale });
    const project = (p) => ({
      x: width / 2 + (p.lon - centre.lon) * rad * EARTH * cos * scale,
      y: height / 2 - (p.lat - centre.lat) * rad * EARTH * scale,
    });
    this.view = {
      unproject: (x, y) => ({
        lat: centre.lat + (height / 2 - y) / scale / EARTH / rad,
        lon: centre.lon + (x - width / 2) / scale / EARTH / cos / rad,
      }),
    };
    for (const m of meetings) {
      const s = project(m);
      this.root.append(svg('circle', { class: 'meeting', cx: s.x.toFixed(1), cy: s.y.toFixed(1), r: 8 }),
        svg('text', { class: 'label', x: s.x.toFixed(1), y: (s.y + 22).toFixed(1), 'text-anchor': 'middle' }, m.name));
    }
    if (pick) {
      const s = project(pick);
      this.root.append(svg('circle', { class: 'picked', cx: s.x.toFixed(1), cy: s.y.toFixed(1), r: 10 }));
    }
    for (const f of friends) {
      const s = project(f.position);
      const dot = svg('circle', { class: 'friend', cx: s.x.toFixed(1), cy: s.y.toFixed(1), r: 9 });
      dot.addEventListener('click', (event) => { event.stopPropagation(); this.onSelect(f.username); });
      this.root.append(dot, svg('text', { class: 'label', x: s.x.toFixed(1), y: (s.y - 14).toFixed(1), 'text-anchor': 'middle' }, f.name));
    }
  }

  refresh() {
    if (this.last) this.draw(this.last);
  }
}
