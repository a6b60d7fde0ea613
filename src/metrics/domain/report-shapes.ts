/**
 * Numbers the lists of metric names reports carry (a host sends the same 28
 * names, in the same order, report after report), so a report crosses to the
 * writer thread as a shape number and its values, not as a Map of strings.
 * A trie over the names: finding a report's shape is one map lookup per name,
 * allocating nothing once the shape is known. Bounded: past MAX_NODES names
 * in the trie, new lists are not numbered and travel as names (-1).
 */
export const NO_SHAPE = -1;
const MAX_NODES = 100_000;

interface Node {
  shape: number;
  next: Map<string, Node> | undefined;
}

export interface ShapeTable {
  /** The shape of the map's keys in their order (numbering it if new), or NO_SHAPE when the table is full. */
  shapeOf(metrics: ReadonlyMap<string, unknown>): number;
  /** Shapes numbered since the last call, with their names, for the writer thread. */
  takeNew(): Array<[shape: number, names: string[]]>;
}

export function createShapeTable(maxNodes = MAX_NODES): ShapeTable {
  const root: Node = { shape: NO_SHAPE, next: undefined };
  let nodes = 0;
  let nextShape = 0;
  let fresh: Array<[number, string[]]> = [];
  return {
    shapeOf(metrics) {
      let node = root;
      for (const name of metrics.keys()) {
        let child = node.next?.get(name);
        if (!child) {
          if (nodes >= maxNodes) return NO_SHAPE;
          child = { shape: NO_SHAPE, next: undefined };
          (node.next ??= new Map()).set(name, child);
          nodes++;
        }
        node = child;
      }
      if (node.shape === NO_SHAPE) {
        node.shape = nextShape++;
        fresh.push([node.shape, [...metrics.keys()]]);
      }
      return node.shape;
    },
    takeNew() {
      const out = fresh;
      fresh = [];
      return out;
    },
  };
}
