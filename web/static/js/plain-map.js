// The map without Leaflet: an SVG of the track, the position with its accuracy
// circle, the destination and a scale bar, in a local flat projection (metres east and north of the
// view's centre; exact enough for the few kilometres of a walk home), over the relay's streets when it
// serves vector tiles (PlainStreets).

import { PlainStreets } from './street-tiles.js';

const SVG = 'http://www.w3.org/2000/svg';
const EARTH = 6371008.8;

function svg(tag, attrs = {}) {
  const el = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) el.setAttribute(k, String(v));
  return el;
}

/** 1, 2 or 5 times a power of ten, at most `metres`. */
function roundDistance(metres) {
  const power = 10 ** Math.floor(Math.log10(Math.max(metres, 1)));
  for (const step of [5, 2, 1]) if (step * power <= metres) return step * power;
  return power;
}

export class PlainMap {
  constructor(element, vectorTiles = null) {
    this.element = element;
    element.classList.add('plain-map');
    this.streets = vectorTiles ? new PlainStreets(element, vectorTiles) : null;
    this.root = svg('svg', { class: 'plain-map-svg', role: 'img', 'aria-label': 'map of the walk' });
    this.destination = svg('circle', { class: 'destination' });
    this.track = svg('polyline', { class: 'track', fill: 'none' });
    this.accuracy = svg('circle', { class: 'accuracy' });
    this.marker = svg('circle', { class: 'position', r: 8 });
    this.scaleLine = svg('path', { class: 'scale-bar' });
    this.scaleText = svg('text', { class: 'scale-text' });
    this.root.append(this.destination, this.track, this.accuracy, this.marker, this.scaleLine, this.scaleText);
    element.append(this.root);
    this.last = null;
  }

  draw(state) {
    this.last = state;
    const width = this.element.clientWidth || 360;
    const height = this.element.clientHeight || 360;
    this.root.setAttribute('viewBox', `0 0 ${width} ${height}`);
    const points = [...state.track];
    if (state.destination) points.push(state.destination);
    if (points.length === 0) {
      this.marker.classList.add('hidden');
      return;
    }
    // Centre and scale so that everything (track, destination, accuracy) fits with a margin.
    const lats = points.map((p) => p.lat);
    const lons = points.map((p) => p.lon);
    const centre = { lat: (Math.min(...lats) + Math.max(...lats)) / 2, lon: (Math.min(...lons) + Math.max(...lons)) / 2 };
    const cos = Math.cos((centre.lat * Math.PI) / 180);
    const project = (p) => ({
      x: ((p.lon - centre.lon) * Math.PI / 180) * EARTH * cos,
      y: ((p.lat - centre.lat) * Math.PI / 180) * EARTH,
    });
    let extent = 100; // metres from the centre, at least
    for (const p of points) {
      const m = project(p);
      const radius = p.radius || p.acc || 0;
      extent = Math.max(extent, Math.abs(m.x) + radius, Math.abs(m.y) + radius);
    }
    const scale = (Math.min(width, height) / 2 - 24) / extent; // pixels per metre
    if (this.streets) this.streets.draw({ width, height, centre, scale });
    const toScreen = (p) => {
      const m = project(p);
      return { x: width / 2 + m.x * scale, y: height / 2 - m.y * scale };
    };
    this.track.setAttribute('points', state.track.map((p) => { const s = toScreen(p); return `${s.x.toFixed(1)},${s.y.toFixed(1)}`; }).join(' '));
    if (state.destination) {
      const s = toScreen(state.destination);
      setCircle(this.destination, s, (state.destination.radius || 50) * scale);
    }
    if (state.position) {
      const s = toScreen(state.position);
      setCircle(this.accuracy, s, (state.position.acc || 0) * scale);
      setCircle(this.marker, s, 8);
      this.marker.classList.remove('hidden');
    }
    const metres = roundDistance((width / 3) / scale);
    const bar = metres * scale;
    const y = height - 16;
    this.scaleLine.setAttribute('d', `M12 ${y - 6} V${y} H${(12 + bar).toFixed(1)} V${y - 6}`);
    this.scaleText.setAttribute('x', '14');
    this.scaleText.setAttribute('y', String(y - 10));
    this.scaleText.textContent = metres >= 1000 ? `${metres / 1000} km` : `${metres} m`;
  }

  refresh() {
    if (this.last) this.draw(this.last);
  }
}

function setCircle(el, centre, r) {
  el.setAttribute('cx', centre.x.toFixed(1));
  el.setAttribute('cy', centre.y.toFixed(1));
  el.setAttribute('r', Math.max(0, r).toFixed(1));
}
