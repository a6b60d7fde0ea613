// Why: a typed, dependency-free event emitter (Node's EventEmitter is not available in browsers).

export class Emitter<Events extends Record<string, unknown>> {
  private readonly listeners = new Map<keyof Events, Set<(value: never) => void>>();

  /** Subscribes; returns the function that unsubscribes. */
  on<E extends keyof Events>(event: E, listener: (value: Events[E]) => void): () => void {
    let set = this.listeners.get(event);
    if (!set) this.listeners.set(event, (set = new Set()));
    set.add(listener as (value: never) => void);
    return () => { set.delete(listener as (value: never) => void); };
  }

  emit<E extends keyof Events>(event: E, value: Events[E]): void {
    for (const l of this.listeners.get(event) ?? []) {
      try {
        (l as (value: Events[E]) => void)(value);
      } catch {
        // A throwing listener must not stop the sync engine or the other listeners.
      }
    }
  }
}
