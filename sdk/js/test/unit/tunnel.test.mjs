// The tunnel's pure parts: frame encode/decode, the credit window, the
// WebSocket client's frames and its message parser (no daemon).
import assert from "node:assert/strict";
import { test } from "node:test";

import {
  CreditWindow,
  TUNNEL_WINDOW,
  WS_MAX_MESSAGE,
  WsParser,
  decodeTunnelAck,
  decodeTunnelFrame,
  encodeTunnelFrame,
  encodeWsFrame,
} from "../../dist/tunnel.js";

test("tunnel frames are a kind, a big-endian stream number and a payload", () => {
  const f = encodeTunnelFrame("d", 0x01020304, Buffer.from("hi"));
  assert.deepEqual([...f], [0x64, 1, 2, 3, 4, 0x68, 0x69]);
  const back = decodeTunnelFrame(f);
  assert.equal(back.kind, "d");
  assert.equal(back.stream, 0x01020304);
  assert.equal(back.payload.toString(), "hi");
  assert.equal(decodeTunnelFrame(encodeTunnelFrame("e", 0xffffffff)).stream, 0xffffffff);
  assert.throws(() => encodeTunnelFrame("x", 1), RangeError);
  assert.throws(() => encodeTunnelFrame("d", 2 ** 32), RangeError);
  assert.throws(() => decodeTunnelFrame(Buffer.from("d\0\0")), RangeError);
  assert.throws(() => decodeTunnelFrame(Buffer.from("z\0\0\0\0")), RangeError);
  const ack = Buffer.alloc(8);
  ack.writeBigUInt64BE(3n << 32n);
  assert.equal(decodeTunnelAck(ack), 3 * 2 ** 32);
  assert.throws(() => decodeTunnelAck(Buffer.alloc(4)), RangeError);
});

test("the window allows 1 MiB past the acknowledged count", () => {
  const w = new CreditWindow();
  assert.equal(TUNNEL_WINDOW, 1 << 20);
  assert.ok(w.fits(TUNNEL_WINDOW) && !w.fits(TUNNEL_WINDOW + 1));
  w.spend(TUNNEL_WINDOW - 10);
  assert.ok(w.fits(10) && !w.fits(11));
  assert.ok(w.ack(100));
  assert.ok(w.fits(110) && !w.fits(111));
  assert.ok(w.ack(50));
  assert.equal(w.acked, 100, "an older count never moves it back");
  assert.equal(w.ack(w.sent + 1), false);
});

function unmask(frame) {
  let n = frame[1] & 0x7f;
  let off = 2;
  if (n === 126) [n, off] = [frame.readUInt16BE(2), 4];
  else if (n === 127) [n, off] = [Number(frame.readBigUInt64BE(2)), 10];
  assert.ok(frame[1] & 0x80, "client frames are masked");
  const mask = frame.subarray(off, off + 4);
  return { op: frame[0] & 0x0f, body: Buffer.from(frame.subarray(off + 4, off + 4 + n).map((b, i) => b ^ mask[i & 3])) };
}

for (const size of [0, 125, 126, 65535, 65536, 200000]) {
  test(`a client frame of ${size} bytes is masked and sized right`, () => {
    const payload = Buffer.alloc(size, 7);
    const { op, body } = unmask(encodeWsFrame(2, payload));
    assert.equal(op, 2);
    assert.ok(body.equals(payload));
  });
}

test("the parser joins fragments, passes control frames and refuses past the cap", () => {
  const got = [];
  const controls = [];
  const p = new WsParser((d, text) => got.push([d.toString(), text]), (op, d) => controls.push([op, d.toString()]));
  const frame = (b0, payload) => Buffer.concat([Buffer.from([b0, payload.length]), Buffer.from(payload)]);
  const all = Buffer.concat([frame(0x81, '{"type":"ready"}'), frame(0x89, "p"), frame(0x02, "ab"), frame(0x80, "cd")]);
  for (let i = 0; i < all.length; i += 3) p.feed(all.subarray(i, i + 3)); // split anywhere
  assert.deepEqual(got, [['{"type":"ready"}', true], ["abcd", false]]);
  assert.deepEqual(controls, [[9, "p"]]);
  const big = Buffer.alloc(10);
  big[0] = 0x82;
  big[1] = 127;
  big.writeBigUInt64BE(BigInt(WS_MAX_MESSAGE + 1), 2);
  assert.throws(() => new WsParser(() => {}, () => {}).feed(big), RangeError);
});
