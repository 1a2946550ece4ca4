// A decoder for Mapbox Vector Tiles (version 2 of the specification): the protobuf of a tile as the
// relay serves it from its MBTiles file (the browser has already undone the gzip). Returns plain
// objects: { layers: { NAME: { extent, features: [{ type, properties, geometry }] } } }, where
// geometry is a list of rings or lines, each a list of [x, y] in tile units (0..extent).
// Only what drawing needs; unknown fields are skipped, as protobuf requires.

export const POINT = 1;
export const LINESTRING = 2;
export const POLYGON = 3;

class Reader {
  constructor(bytes, start = 0, end = bytes.length) {
    this.bytes = bytes;
    this.pos = start;
    this.end = end;
  }

  varint() {
    let result = 0;
    let shift = 0;
    for (;;) {
      if (this.pos >= this.end) throw new Error('truncated varint');
      const byte = this.bytes[this.pos++];
      // Multiplication, not <<: values past 2^31 (64-bit ids) must not wrap; ids lose precision, unused here.
      result += (byte & 0x7f) * 2 ** shift;
      if (byte < 0x80) return result;
      shift += 7;
      if (shift > 63) throw new Error('varint too long');
    }
  }

  /** The [start, end) of a length-delimited field. */
  slice() {
    const length = this.varint();
    const start = this.pos;
    this.pos += length;
    if (this.pos > this.end) throw new Error('truncated field');
    return [start, this.pos];
  }

  skip(wireType) {
    if (wireType === 0) this.varint();
    else if (wireType === 1) this.pos += 8;
    else if (wireType === 2) this.slice();
    else if (wireType === 5) this.pos += 4;
    else throw new Error(`unsupported wire type ${wireType}`);
    if (this.pos > this.end) throw new Error('truncated field');
  }

  /** Calls `field(number, wireType)` for each field until the end; `field` reads it or returns false to skip it. */
  fields(field) {
    while (this.pos < this.end) {
      const key = this.varint();
      const number = Math.floor(key / 8);
      const wireType = key & 7;
      if (field(number, wireType) === false) this.skip(wireType);
    }
  }

  packed() {
    const [start, end] = this.slice();
    const inner = new Reader(this.bytes, start, end);
    const values = [];
    while (inner.pos < inner.end) values.push(inner.varint());
    return values;
  }

  string() {
    const [start, end] = this.slice();
    return new TextDecoder().decode(this.bytes.subarray(start, end));
  }
}

const zigzag = (n) => (n % 2 === 1 ? -(n + 1) / 2 : n / 2);

export function decodeTile(buffer) {
  const bytes = buffer instanceof Uint8Array ? buffer : new Uint8Array(buffer);
  const reader = new Reader(bytes);
  const layers = {};
  reader.fields((number, wireType) => {
    if (number !== 3 || wireType !== 2) return false;
    const [start, end] = reader.slice();
    const layer = decodeLayer(new Reader(bytes, start, end));
    if (layer.name) layers[layer.name] = layer;
    return true;
  });
  return { layers };
}

function decodeLayer(reader) {
  const layer = { name: '', extent: 4096, features: [] };
  const keys = [];
  const values = [];
  const raw = [];
  reader.fields((number, wireType) => {
    if (number === 1 && wireType === 2) layer.name = reader.string();
    else if (number === 2 && wireType === 2) raw.push(reader.slice());
    else if (number === 3 && wireType === 2) keys.push(reader.string());
    else if (number === 4 && wireType === 2) values.push(decodeValue(reader));
    else if (number === 5 && wireType === 0) layer.extent = reader.varint() || 4096;
    else return false;
    return true;
  });
  for (const [start, end] of raw) layer.features.push(decodeFeature(new Reader(reader.bytes, start, end), keys, values));
  return layer;
}

function decodeValue(reader) {
  const [start, end] = reader.slice();
  const inner = new Reader(reader.bytes, start, end);
  let value = null;
  inner.fields((number, wireType) => {
    if (number === 1 && wireType === 2) value = inner.string();
    else if (number === 2 && wireType === 5) { value = new DataView(inner.bytes.buffer, inner.bytes.byteOffset + inner.pos, 4).getFloat32(0, true); inner.pos += 4; }
    else if (number === 3 && wireType === 1) { value = new DataView(inner.bytes.buffer, inner.bytes.byteOffset + inner.pos, 8).getFloat64(0, true); inner.pos += 8; }
    else if ((number === 4 || number === 5) && wireType === 0) value = inner.varint();
    else if (number === 6 && wireType === 0) value = zigzag(inner.varint());
    else if (number === 7 && wireType === 0) value = inner.varint() !== 0;
    else return false;
    return true;
  });
  return value;
}

function decodeFeature(reader, keys, values) {
  const feature = { type: 0, properties: {}, geometry: [] };
  let commands = [];
  reader.fields((number, wireType) => {
    if (number === 2 && wireType === 2) {
      const tags = reader.packed();
      for (let i = 0; i + 1 < tags.length; i += 2) {
        if (tags[i] < keys.length && tags[i + 1] < values.length) feature.properties[keys[tags[i]]] = values[tags[i + 1]];
      }
    } else if (number === 3 && wireType === 0) feature.type = reader.varint();
    else if (number === 4 && wireType === 2) commands = reader.packed();
    else return false;
    return true;
  });
  feature.geometry = decodeGeometry(commands);
  return feature;
}

/** MoveTo (1) starts a part, LineTo (2) extends it, ClosePath (7) closes a ring; coordinates are zigzag deltas. */
function decodeGeometry(commands) {
  const parts = [];
  let part = null;
  let x = 0;
  let y = 0;
  let i = 0;
  while (i < commands.length) {
    const command = commands[i] & 7;
    const count = Math.floor(commands[i] / 8);
    i += 1;
    if (command === 7) {
      if (part && part.length) part.push([part[0][0], part[0][1]]);
      continue;
    }
    if (command !== 1 && command !== 2) break;
    for (let n = 0; n < count && i + 1 < commands.length; n += 1) {
      x += zigzag(commands[i]);
      y += zigzag(commands[i + 1]);
      i += 2;
      if (command === 1) {
        part = [];
        parts.push(part);
      }
      if (part) part.push([x, y]);
    }
  }
  return parts;
}
