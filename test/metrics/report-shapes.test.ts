import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createShapeTable, NO_SHAPE, type ShapeTable } from '../../src/metrics/domain/report-shapes.js';

const shapeOf = (shapes: ShapeTable, ...names: string[]) => shapes.shapeOfNames(names, names.length);

test('a list of names gets one number, reported once; another order or another list is another shape', () => {
  const shapes = createShapeTable();
  const a = shapeOf(shapes, 'cpu.usage', 'memory.used');
  assert.equal(shapes.shapeOfNames(['cpu.usage', 'memory.used', 'more'], 2), a, 'the first `count` names only');
  const b = shapeOf(shapes, 'memory.used', 'cpu.usage');
  const c = shapeOf(shapes, 'cpu.usage');
  const d = shapeOf(shapes, 'cpu.usage', 'memory.used', 'disk./.used');
  assert.equal(new Set([a, b, c, d]).size, 4);
  assert.deepEqual(shapes.takeNew(), [[a, ['cpu.usage', 'memory.used']], [b, ['memory.used', 'cpu.usage']], [c, ['cpu.usage']], [d, ['cpu.usage', 'memory.used', 'disk./.used']]]);
  assert.deepEqual(shapes.takeNew(), []);
  assert.equal(shapeOf(shapes, 'cpu.usage', 'memory.used'), a);
  assert.deepEqual(shapes.takeNew(), [], 'a known shape is not sent again');
});

test('past its bound the table numbers no new list, and the lists it knows keep their numbers', () => {
  const shapes = createShapeTable(10);
  const known = shapeOf(shapes, 'a', 'b', 'c');
  for (let i = 0; i < 7; i++) assert.notEqual(shapeOf(shapes, `n${i}`), NO_SHAPE);
  assert.equal(shapeOf(shapes, 'x', 'y'), NO_SHAPE);
  assert.equal(shapeOf(shapes, 'a', 'b', 'c'), known);
  assert.equal(shapeOf(shapes, 'a', 'b'), shapeOf(shapes, 'a', 'b'), 'a prefix already in the trie can still be numbered');
  assert.equal(shapes.takeNew().length, 1 + 7 + 1);
});

test('a name list refuses a name it holds, on a new path, on a known one and past the bound, and numbers what the same names would', () => {
  for (const bound of [100, 2]) {
    const shapes = createShapeTable(bound);
    const list = shapes.nameList();
    const fill = (...names: string[]) => {
      list.reset();
      return names.map((n) => list.add(n));
    };
    assert.deepEqual(fill('a', 'b', 'a', 'c', 'b'), [true, true, false, true, false], `bound ${bound}: a new path`);
    assert.deepEqual([...list.names.slice(0, list.size)], ['a', 'b', 'c'], 'refused names are not added');
    const shape = list.shape();
    assert.equal(shape, bound === 100 ? shapeOf(shapes, 'a', 'b', 'c') : NO_SHAPE);
    assert.deepEqual(fill('a', 'b', 'c', 'a'), [true, true, true, false], `bound ${bound}: a known path, then a repeat`);
    assert.deepEqual(fill('x', 'x'), [true, false], `bound ${bound}: after a reset the list starts empty`);
  }
});

test('a name list finds a repeat of a fresh name without scanning the list: 200,000 new names, then each again', () => {
  // A guard against the quadratic, not a speed target: each name off a known path was once compared with every name
  // before it (29 s for these, against 0.3 s now). A timeout cannot stop a synchronous loop, so the time is asserted.
  const list = createShapeTable().nameList();
  const names = Array.from({ length: 200_000 }, (_, i) => `network.k${i}`);
  const started = performance.now();
  assert.ok(names.every((n) => list.add(n)));
  assert.ok(names.every((n) => !list.add(n)), 'each is refused the second time');
  assert.ok(performance.now() - started < 10_000, `linear in the names: took ${Math.round(performance.now() - started)} ms`);
  list.reset();
  assert.deepEqual([list.add('network.k7'), list.add('cpu.usage'), list.add('network.k7')], [true, true, false], 'after a reset the list starts empty');
});

test('a list that leaves a known path mid-way still refuses the names it took on the path', () => {
  const shapes = createShapeTable();
  const list = shapes.nameList();
  for (const n of ['a', 'b', 'c']) list.add(n);
  list.reset();
  assert.deepEqual(['a', 'b', 'x', 'a', 'b', 'x', 'y'].map((n) => list.add(n)), [true, true, true, false, false, false, true]);
});
