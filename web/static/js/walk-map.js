// The map of one walk: the latest position with its accuracy circle, the track so far and the
// destination. Drawn with Leaflet when the relay serves it (over a tile server's images when the
// operator configured one, or streets drawn from the relay's own vector tiles by street-tiles.js, else
// a plain background), otherwise by PlainMap, an SVG drawing of the same things with a scale bar.
// Either way the map follows the walker until the user pans it, and a "Follow" button brings that back.
//
// The container's data attributes (data-lat, data-lon, data-track-points, data-renderer) say what
// is drawn, for assistive tooling and the browser tests.

import { h } from './dom.js';
import { streetLayer } from './street-tiles.js';
import { PlainMap } from './plain-map.js';

export class WalkMap {
  constructor(container, support) {
    this.container = container;
    this.track = [];
    this.position = null;
    this.destination = null;
    this.following = true;
    this.followButton = h('button', { type: 'button', class: 'follow hidden', onclick: () => this.follow() }, 'Follow');
    this.canvas = h('div', { class: 'map-canvas' });
    container.replaceChildren(this.canvas, this.followButton);
    container.classList.add('walk-map');
    if (support.leaflet) this.renderer = new LeafletRenderer(this.canvas, support, () => this.userPanned());
    else this.renderer = new PlainMap(this.canvas, support.vectorTiles);
    container.dataset.renderer = support.leaflet ? (support.tiles ? 'leaflet-tiles' : support.vectorTiles ? 'leaflet-streets' : 'leaflet') : 'plain';
    this.updateData();
  }

  /** Adds a fix to the track and moves the marker there. */
  addPosition(pos) {
    if (!pos || typeof pos.lat !== 'number' || typeof pos.lon !== 'number') return;
    const last = this.track[this.track.length - 1];
    if (!last || last.lat !== pos.lat || last.lon !== pos.lon || last.ts !== pos.ts) this.track.push(pos);
    this.position = pos;
    this.draw();
  }

  /** Replaces the whole track (the relay's trail of the walk, then what came since) and moves the marker. */
  setTrack(track) {
    this.track = track.filter((p) => p && typeof p.lat === 'number' && typeof p.lon === 'number');
    if (this.track.length) this.position = this.track[this.track.length - 1];
    this.draw();
  }

  setDestination(destination) {
    this.destination = destination || null;
    this.draw();
  }

  follow() {
    this.following = true;
    this.followButton.classList.add('hidden');
    this.draw();
  }

  userPanned() {
    if (!this.following) return;
    this.following = false;
    this.followButton.classList.remove('hidden');
    this.updateData();
  }

  draw() {
    this.renderer.draw({
      track: this.track, position: this.position, destination: this.destination, following: this.following,
    });
    this.updateData();
  }

  updateData() {
    const data = this.container.dataset;
    data.trackPoints = String(this.track.length);
    data.following = String(this.following);
    if (this.position) {
      data.lat = String(this.position.lat);
      data.lon = String(this.position.lon);
    }
  }

  /** Call when the container was shown or resized. */
  refresh() {
    if (this.renderer.refresh) this.renderer.refresh();
    this.draw();
  }

  destroy() {
    if (this.renderer.destroy) this.renderer.destroy();
    this.container.replaceChildren();
  }
}

class LeafletRenderer {
  constructor(element, support, onPan) {
    const L = support.leaflet;
    this.L = L;
    this.map = L.map(element, { zoomControl: true, attributionControl: Boolean(support.tiles || support.vectorTiles) });
    if (support.tiles) {
      L.tileLayer(support.tiles.url, { attribution: support.tiles.attribution || '', maxZoom: 19, referrerPolicy: 'no-referrer' })
        .addTo(this.map);
    } else if (support.vectorTiles) {
      streetLayer(L, support.vectorTiles).addTo(this.map);
    } else {
      element.classList.add('no-tiles');
    }
    L.control.scale({ imperial: false }).addTo(this.map);
    this.map.setView([0, 0], 2);
    this.map.on('dragstart', onPan);
    this.track = L.polyline([], { className: 'track', color: '#1d3557', weight: 4, opacity: 0.8 }).addTo(this.map);
    this.accuracy = null;
    this.marker = null;
    this.destination = null;
    this.fitted = false;
  }

  draw({ track, position, destination, following }) {
    const L = this.L;
    this.track.setLatLngs(track.map((p) => [p.lat, p.lon]));
    if (destination) {
      const latlng = [destination.lat, destination.lon];
      if (!this.destination) {
        this.destination = L.circle(latlng, { radius: destination.radius || 50, className: 'destination', color: '#2a9d8f', dashArray: '6 6', fillOpacity: 0.08 }).addTo(this.map);
      } else {
        this.destination.setLatLng(latlng).setRadius(destination.radius || 50);
      }
    }
    if (!position) return;
    const latlng = [position.lat, position.lon];
    if (!this.marker) {
      this.accuracy = L.circle(latlng, { radius: position.acc || 0, className: 'accuracy', color: '#457b9d', weight: 1, fillOpacity: 0.15 }).addTo(this.map);
      this.marker = L.circleMarker(latlng, { radius: 8, className: 'position', color: '#fff', weight: 3, fillColor: '#e63946', fillOpacity: 1 }).addTo(this.map);
    } else {
      this.accuracy.setLatLng(latlng).setRadius(position.acc || 0);
      this.marker.setLatLng(latlng);
    }
    if (!following) return;
    if (!this.fitted) {
      this.fitted = true;
      this.map.setView(latlng, 17, { animate: false });
    } else {
      this.map.panTo(latlng, { animate: false });
    }
  }

  refresh() {
    this.map.invalidateSize();
  }

  destroy() {
    this.map.remove();
  }
}
