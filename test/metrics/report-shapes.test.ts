import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ColumnMetrics, createShapeTable, NO_SHAPE } from '../../src/metrics/domain/report-shapes.js';

const m = (...names: string[]) => new Map(names.map((n, i) => [n, i]));

test('a list of names gets one number, reported once; another order or another list is another shape', () => {
  const shapes = createShapeTable();
  const a = shapes.shapeOf(m('cpu.usage', 'memory.used'));
  assert.equal(shapes.shapeOf(new Map([['cpu.usage', 7], ['memory.used', 8]])), a, 'values do not matter');
  const b = shapes.shapeOf(m('memory.used', 'cpu.usage'));
  const c = shapes.shapeOf(m('cpu.usage'));
  const d = shapes.shapeOf(m('cpu.usage', 'memory.used', 'disk./.used'));
  assert.equal(new Set([a, b, c, d]).size, 4);
  assert.deepEqual(shapes.takeNew(), [[a, ['cpu.usage', 'memory.used']], [b, ['memory.used', 'cpu.usage']], [c, ['cpu.usage']], [d, ['cpu.usage', 'memory.used', 'disk./.used']]]);
  assert.deepEqual(shapes.takeNew(), []);
  assert.equal(shapes.shapeOf(m('cpu.usage', 'memory.used')), a);
  assert.deepEqual(shapes.takeNew(), [], 'a known shape is not sent again');
});

test('past its bound the table numbers no new list, and the lists it knows keep their numbers', () => {
  const shapes = createShapeTable(10);
  const known = shapes.shapeOf(m('a', 'b', 'c'));
  for (let i = 0; i < 7; i++) assert.notEqual(shapes.shapeOf(m(`n${i}`)), NO_SHAPE);
  assert.equal(shapes.shapeOf(m('x', 'y')), NO_SHAPE);
  assert.equal(shapes.shapeOf(m('a', 'b', 'c')), known);
  assert.equal(shapes.shapeOf(m('a', 'b')), shapes.shapeOf(m('a', 'b')), 'a prefix already in the trie can still be numbered');
  assert.equal(shapes.takeNew().length, 1 + 7 + 1);
});

test('a list of names, its columns as ColumnMetrics, and a map of the same names share one shape', () => {
  const shapes = createShapeTable();
  const names = ['cpu.usage', 'memory.used', 'extra'];
  const a = shapes.shapeOfNames(names, 2);
  assert.equal(shapes.shapeOf(m('cpu.usage', 'memory.used')), a);
  assert.equal(shapes.shapeOf(new ColumnMetrics(names.slice(0, 2), new Float64Array([1, 2]))), a);
  assert.deepEqual(shapes.takeNew(), [[a, ['cpu.usage', 'memory.used']]], 'only the first `count` names');
});

test('a name list refuses a name it holds, on a new path, on a known one and past the bound, and numbers what a map would', () => {
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
    assert.equal(shape, bound === 100 ? shapes.shapeOf(m('a', 'b', 'c')) : NO_SHAPE);
    assert.deepEqual(fill('a', 'b', 'c', 'a'), [true, true, true, false], `bound ${bound}: a known path, then a repeat`);
    assert.deepEqual(fill('x', 'x'), [true, false], `bound ${bound}: after a reset the list starts empty`);
  }
});
