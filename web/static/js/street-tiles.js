// Streets from the relay's own vector tiles (`--map-tiles-mbtiles`, served at /tiles/{z}/{x}/{y}.pbf):
// fetched from the relay only, decoded by vector-tile.js and drawn on canvases: water, parks,
// buildings, then paths and roads. Beyond the file's deepest zoom the deepest tile is enlarged
// ("overzoom"); a tile the relay does not have (404, another zoom or place) is left blank.
//
// The map's container gets data-street-tiles (tiles drawn) and data-street-features (features drawn)
// for the browser tests and assistive tooling.

import { decodeTile, LINESTRING, POLYGON } from './vector-tile.js';

export const STYLE = {
  land: '#f2efe9',
  water: '#aad3df',
  park: '#c8e6b0',
  building: '#d9d0c9',
  buildingEdge: '#c4b8ad',
  casing: '#bdb5a8',
  minor: '#ffffff',
  major: '#f7c96b',
  path: '#b86f3c',
};

const cache = new Map(); // "z/x/y" -> Promise<decoded tile | null>
const CACHE_LIMIT = 200;

/** The decoded tile z/x/y from the relay, null when it has none; remembered for the page's life. */
export function fetchTile(config, z, x, y) {
  const key = `${z}/${x}/${y}`;
  if (cache.has(key)) return cache.get(key);
  const url = config.url.replace('{z}', z).replace('{x}', x).replace('{y}', y);
  const promise = fetch(url, { credentials: 'omit' })
    .then((response) => (response.ok ? response.arrayBuffer().then(decodeTile) : null))
    .catch(() => null);
  if (cache.size >= CACHE_LIMIT) cache.delete(cache.keys().next().value);
  cache.set(key, promise);
  return promise;
}

/**
 * Draws a decoded tile on `ctx`: tile units are mapped to pixels by `scale` (pixels per tile unit) and
 * shifted by (dx, dy); the canvas (size × size) is first filled with land unless `background` is false.
 * Returns how many features were drawn.
 */
export function drawTile(ctx, tile, { scale, dx = 0, dy = 0, size, background = true }) {
  if (background) {
    ctx.fillStyle = STYLE.land;
    ctx.fillRect(0, 0, size, size);
  }
  const features = (name, type, keep = () => true) => {
    const { extent = 4096, features: all = [] } = tile.layers[name] || {};
    return all.filter((f) => f.type === type && keep(f)).map((f) => ({ f, k: (scale * 4096) / extent }));
  };
  const trace = ({ f, k }) => {
    ctx.beginPath();
    for (const part of f.geometry) {
      part.forEach(([x, y], i) => (i === 0 ? ctx.moveTo(x * k + dx, y * k + dy) : ctx.lineTo(x * k + dx, y * k + dy)));
    }
  };
  const water = features('water', POLYGON);
  const rivers = features('water', LINESTRING);
  const parks = features('park', POLYGON);
  const buildings = features('building', POLYGON);
  const roads = features('transportation', LINESTRING, (f) => f.properties.class !== 'path');
  const paths = features('transportation', LINESTRING, (f) => f.properties.class === 'path');
  const area = (items, colour, edge) => items.forEach((item) => {
    trace(item);
    ctx.fillStyle = colour;
    ctx.fill('evenodd');
    if (edge) { ctx.strokeStyle = edge; ctx.lineWidth = 1; ctx.stroke(); }
  });
  const line = (items, style) => items.forEach((item) => {
    trace(item);
    style(item.f);
    ctx.stroke();
  });
  area(water, STYLE.water);
  line(rivers, () => { ctx.strokeStyle = STYLE.water; ctx.lineWidth = 3; });
  area(parks, STYLE.park);
  area(buildings, STYLE.building, STYLE.buildingEdge);
  // Roads in two passes (casing, then fill) so that crossings join; paths dashed on top. Widths grow
  // with the zoom (scale is larger when a tile is enlarged).
  const width = (f) => (f.properties.class === 'major' ? 7 : 5) * Math.min(2, Math.max(0.5, scale * 16));
  ctx.lineCap = 'round';
  ctx.lineJoin = 'round';
  line(roads, (f) => { ctx.strokeStyle = STYLE.casing; ctx.lineWidth = width(f) + 2; });
  line(roads, (f) => { ctx.strokeStyle = f.properties.class === 'major' ? STYLE.major : STYLE.minor; ctx.lineWidth = width(f); });
  ctx.setLineDash([4, 3]);
  line(paths, () => { ctx.strokeStyle = STYLE.path; ctx.lineWidth = 2; });
  ctx.setLineDash([]);
  return water.length + rivers.length + parks.length + buildings.length + roads.length + paths.length;
}

/** Where tile z/x/y comes from: itself, or a part of its ancestor at the file's deepest zoom. */
export function sourceOf(config, z, x, y, size) {
  if (z < config.minZoom) return null;
  if (z <= config.maxZoom) return { z, x, y, scale: size / 4096, dx: 0, dy: 0 };
  const d = z - config.maxZoom;
  const n = 2 ** d;
  return {
    z: config.maxZoom, x: Math.floor(x / n), y: Math.floor(y / n),
    scale: (size * n) / 4096, dx: -(x % n) * size, dy: -(y % n) * size,
  };
}

function count(container, name, by) {
  if (!container) return;
  container.dataset[name] = String(Number(container.dataset[name] || 0) + by);
}

/** A Leaflet layer of canvas tiles drawn from the relay's vector tiles. */
export function streetLayer(L, config) {
  const Layer = L.GridLayer.extend({
    createTile(coords, done) {
      const canvas = document.createElement('canvas');
      const ratio = window.devicePixelRatio || 1;
      const size = this.getTileSize().x;
      canvas.width = size * ratio;
      canvas.height = size * ratio;
      const source = sourceOf(config, coords.z, coords.x, coords.y, size * ratio);
      const container = this._map && this._map.getContainer().closest('.map');
      if (!source) {
        setTimeout(() => done(null, canvas), 0);
        return canvas;
      }
      fetchTile(config, source.z, source.x, source.y).then((tile) => {
        if (tile) {
          const drawn = drawTile(canvas.getContext('2d'), tile, { ...source, size: size * ratio });
          canvas.dataset.features = String(drawn);
          count(container, 'streetTiles', 1);
          count(container, 'streetFeatures', drawn);
        }
        done(null, canvas);
      });
      return canvas;
    },
  });
  return new Layer({ attribution: config.attribution || '', maxZoom: 19, className: 'street-tiles' });
}

const EARTH = 6371008.8;
const RAD = Math.PI / 180;
const MAX_PLAIN_TILES = 36;

/** The Web Mercator tile numbers (fractional) of a point at zoom z. */
function tileXY(lat, lon, z) {
  const n = 2 ** z;
  return { x: ((lon + 180) / 360) * n, y: ((1 - Math.asinh(Math.tan(lat * RAD)) / Math.PI) / 2) * n };
}

function tileLatLon(x, y, z) {
  const n = 2 ** z;
  return { lat: Math.atan(Math.sinh(Math.PI * (1 - (2 * y) / n))) / RAD, lon: (x / n) * 360 - 180 };
}

/**
 * Streets under the page's own SVG map (no Leaflet): a canvas behind the SVG, redrawn for the view
 * the SVG shows (a local flat projection: `scale` pixels per metre around `centre`).
 */
export class PlainStreets {
  constructor(element, config) {
    this.config = config;
    this.canvas = document.createElement('canvas');
    this.canvas.className = 'plain-streets';
    element.prepend(this.canvas);
    this.container = element.closest('.map');
    this.generation = 0;
  }

  async draw({ width, height, centre, scale }) {
    const generation = ++this.generation;
    const cos = Math.cos(centre.lat * RAD);
    // The zoom whose pixels are closest to the map's metres per pixel, the file's deepest at most.
    const z = Math.min(this.config.maxZoom, Math.round(Math.log2(2 * Math.PI * EARTH * cos * scale / 256)));
    const toLatLon = (x, y) => ({
      lat: centre.lat + (height / 2 - y) / scale / EARTH / RAD,
      lon: centre.lon + (x - width / 2) / scale / EARTH / cos / RAD,
    });
    const toScreen = (p) => ({
      x: width / 2 + (p.lon - centre.lon) * RAD * EARTH * cos * scale,
      y: height / 2 - (p.lat - centre.lat) * RAD * EARTH * scale,
    });
    const nw = toLatLon(0, 0);
    const se = toLatLon(width, height);
    const from = tileXY(nw.lat, nw.lon, z);
    const to = tileXY(se.lat, se.lon, z);
    const wanted = [];
    if (z >= this.config.minZoom) {
      for (let x = Math.floor(from.x); x <= Math.floor(to.x); x += 1) {
        for (let y = Math.floor(from.y); y <= Math.floor(to.y); y += 1) wanted.push({ x, y });
      }
    }
    const tiles = wanted.length <= MAX_PLAIN_TILES
      ? await Promise.all(wanted.map(({ x, y }) => fetchTile(this.config, z, x, y).then((tile) => ({ x, y, tile }))))
      : [];
    if (generation !== this.generation) return; // a newer view is being drawn
    const ratio = window.devicePixelRatio || 1;
    this.canvas.width = width * ratio;
    this.canvas.height = height * ratio;
    const ctx = this.canvas.getContext('2d');
    ctx.scale(ratio, ratio);
    let drawn = 0;
    let count = 0;
    for (const { x, y, tile } of tiles) {
      if (!tile) continue;
      const corner = toScreen(tileLatLon(x, y, z));
      const opposite = toScreen(tileLatLon(x + 1, y + 1, z));
      drawn += drawTile(ctx, tile, { scale: (opposite.x - corner.x) / 4096, dx: corner.x, dy: corner.y, background: false });
      count += 1;
    }
    if (this.container) {
      this.container.dataset.streetTiles = String(count);
      this.container.dataset.streetFeatures = String(drawn);
    }
  }
}
