/**
 * A process started by the `npm start` launcher (with an IPC channel) stops
 * when the launcher is gone, however it went (SIGKILL included): the channel
 * closes with the launcher, and this turns that into the process's own
 * SIGTERM, so it shuts down gracefully. Without a channel (systemd, a shell)
 * it does nothing. The channel does not keep the process alive. Call it
 * first thing: before the SIGTERM handlers exist, the default action (exit)
 * is the right one too.
 */
export function exitWithParent(): void {
  // Spawned with a channel that already closed (the launcher died while this process was loading): stop now.
  if (typeof process.send === 'function' && !process.connected) {
    process.kill(process.pid, 'SIGTERM');
    return;
  }
  if (!process.channel) return;
  process.channel.unref();
  process.once('disconnect', () => process.kill(process.pid, 'SIGTERM'));
}
