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
  /**
   * The shape of the first `count` of `names` in their order (numbering it if new), or NO_SHAPE when the table is
   * full. The names hold no name twice, as a report's never do: a name list takes every path of the table for a list
   * without repeats.
   */
  shapeOfNames(names: readonly string[], count: number): number;
  /** A list that a report's names are added to one at a time as it is flattened (one list per caller, reused). */
  nameList(): NameList;
  /** Shapes numbered since the last call, with their names, for the writer thread. */
  takeNew(): Array<[shape: number, names: string[]]>;
}

export function createShapeTable(maxNodes = MAX_NODES): ShapeTable {
  const root: Node = { shape: NO_SHAPE, next: undefined };
  let nodes = 0;
  let nextShape = 0;
  let fresh: Array<[number, string[]]> = [];
  /** The child of `node` for `name`, made if new; undefined when the table is full. */
  const childOf = (node: Node, name: string): Node | undefined => {
    let child = node.next?.get(name);
    if (!child) {
      if (nodes >= maxNodes) return undefined;
      child = { shape: NO_SHAPE, next: undefined };
      (node.next ??= new Map()).set(name, child);
      nodes++;
    }
    return child;
  };
  /** The node's shape, numbered if new; its names (the first `count` of the list) are copied only then. */
  const numbered = (node: Node, names: readonly string[], count: number): number => {
    if (node.shape === NO_SHAPE) {
      node.shape = nextShape++;
      fresh.push([node.shape, names.slice(0, count)]);
    }
    return node.shape;
  };
  const table: ShapeTable = {
    shapeOfNames(names, count) {
      let node = root;
      for (let i = 0; i < count; i++) {
        const child = childOf(node, names[i]!);
        if (!child) return NO_SHAPE;
        node = child;
      }
      return numbered(node, names, count);
    },
    nameList() {
      const names: string[] = [];
      let count = 0;
      // The node of the names so far; undefined once past the table's bound.
      let node: Node | undefined = root;
      // Off the trie's known paths a repeat is found by the number of the list (reset to reset) that last added the
      // name: the names so far are numbered once, when the list first leaves a known path, then each as it is added.
      let list = 0;
      let numberedSoFar = false;
      let lastListOf = new Map<string, number>();
      return {
        names,
        get size() { return count; },
        add(name) {
          const known = node?.next?.get(name);
          // A node is made only for a name not already in the list before it, so a known path has no repeat.
          if (known) node = known;
          else {
            if (!numberedSoFar) {
              for (let i = 0; i < count; i++) lastListOf.set(names[i]!, list);
              numberedSoFar = true;
            }
            if (lastListOf.get(name) === list) return false;
            if (node) node = childOf(node, name);
          }
          if (numberedSoFar) lastListOf.set(name, list);
          names[count++] = name;
          return true;
        },
        shape() {
          return node ? numbered(node, names, count) : NO_SHAPE;
        },
        reset() {
          count = 0;
          node = root;
          list++;
          numberedSoFar = false;
          // Names clients invent cost memory once, not for good.
          if (lastListOf.size > MAX_NODES) lastListOf = new Map();
        },
      };
    },
    takeNew() {
      const out = fresh;
      fresh = [];
      return out;
    },
  };
  return table;
}

/**
 * A report's metric names, added as flattening finds them, with what a Map
 * of them would refuse (a name twice) and nothing a Map would allocate:
 * the names array and its trie path are reused report after report.
 */
export interface NameList {
  /** The names added since the last reset are its first `size` entries. */
  readonly names: readonly string[];
  readonly size: number;
  /** Adds `name`; false (and nothing added) when the list already holds it. */
  add(name: string): boolean;
  /** The list's shape, numbered if new; NO_SHAPE past the table's bound. */
  shape(): number;
  reset(): void;
}

/**
 * A report's metrics (NewReport.metrics): its names in the order flattening
 * found them and their values, read like a Map of them. Reports read from a
 * bulk body share the names of their shape and view the body's values
 * column, so a thousand reports do not become a thousand Maps; either way a
 * report crosses to the writer thread as a shape number and a copy of its
 * values.
 */
export class ReportMetrics implements ReadonlyMap<string, number> {
  /** `names` holds no name twice (flattening refuses a name reported twice); `valueColumn[i]` is the value of `names[i]`. */
  constructor(readonly names: readonly string[], readonly valueColumn: Float64Array) {}
  /** The metrics of a list of name and value pairs, names unique (tests, tools). */
  static of(entries: Iterable<readonly [string, number]>): ReportMetrics {
    const list = [...entries];
    if (new Set(list.map(([name]) => name)).size !== list.length) throw new Error('a metric name appears twice');
    return new ReportMetrics(list.map(([name]) => name), Float64Array.from(list, ([, value]) => value));
  }
  get size(): number { return this.names.length; }
  get(name: string): number | undefined {
    const i = this.names.indexOf(name);
    return i < 0 ? undefined : this.valueColumn[i];
  }
  has(name: string): boolean { return this.names.includes(name); }
  keys(): MapIterator<string> { return this.names.values(); }
  values(): MapIterator<number> { return this.valueColumn.values(); }
  *entries(): MapIterator<[string, number]> {
    for (let i = 0; i < this.names.length; i++) yield [this.names[i]!, this.valueColumn[i]!];
  }
  [Symbol.iterator](): MapIterator<[string, number]> { return this.entries(); }
  forEach(f: (value: number, name: string, map: ReadonlyMap<string, number>) => void): void {
    for (let i = 0; i < this.names.length; i++) f(this.valueColumn[i]!, this.names[i]!, this);
  }
}
