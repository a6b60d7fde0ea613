// Why: the Node-only entry `fleetsync/client/sqlite`, kept apart so browser bundles never import better-sqlite3.
export { createSqliteStore } from './sqlite-store.js';
