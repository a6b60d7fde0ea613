#!/bin/sh
# Installs the host agent on a monitored host in one command (as root), from a build (npm run build) or a release:
#   sudo sh scripts/install-agent.sh [path/to/host-agent.cjs]
# It needs Node.js 22 or 24 on the host and nothing else: host-agent.cjs is one bundled file with no dependencies.
# Installs /usr/local/lib/host-agent/host-agent.cjs, the systemd unit (run by the `node` this script checked), and
# /etc/host-agent/env (kept if present), then enables the service, and starts it once the env file has a token.
# DESTDIR installs under another root (packaging, tests) without touching systemd; SYSTEMCTL replaces systemctl (tests).
set -eu
here=$(cd "$(dirname "$0")/.." && pwd)
bundle=${1:-$here/dist/host-agent.cjs}
dest=${DESTDIR:-}
[ -f "$bundle" ] || { echo "install-agent: $bundle not found: run npm run build first (README, \"Host agent\")" >&2; exit 2; }
node_bin=$(command -v node || true)
node_major=$([ -n "$node_bin" ] && "$node_bin" -p 'process.versions.node.split(".")[0]' 2>/dev/null || echo 0)
if [ "$node_major" -lt 22 ]; then echo "install-agent: Node.js 22 or newer is required on this host (found: $([ -n "$node_bin" ] && "$node_bin" --version 2>/dev/null || echo none))" >&2; exit 1; fi

install -d -m 0755 "$dest/usr/local/lib/host-agent" "$dest/etc/systemd/system"
install -m 0644 "$bundle" "$dest/usr/local/lib/host-agent/host-agent.cjs"
# Earlier builds shipped an ES module under this name; the unit now starts the CommonJS bundle.
rm -f "$dest/usr/local/lib/host-agent/host-agent.mjs"
# The unit runs the node checked above, not whichever /usr/bin/node the host has.
sed "s|^ExecStart=/usr/bin/node |ExecStart=$node_bin |" "$here/deploy/host-agent.service" > "$dest/etc/systemd/system/host-agent.service"
chmod 0644 "$dest/etc/systemd/system/host-agent.service"
install -d -m 0755 "$dest/etc/host-agent"
if [ ! -f "$dest/etc/host-agent/env" ]; then
  (umask 077; printf 'HOST_AGENT_URL=https://metrics.example.com\nHOST_AGENT_TOKEN=\n' > "$dest/etc/host-agent/env")
  echo "install-agent: wrote $dest/etc/host-agent/env: set HOST_AGENT_URL and HOST_AGENT_TOKEN there"
fi
[ -f "$dest/etc/host-agent/config.json" ] || printf '{ "services": [], "alerts": [] }\n' > "$dest/etc/host-agent/config.json"
# The agent runs as a systemd DynamicUser: it must be able to read its configuration (secrets stay in the env file,
# which systemd reads as root). Also repairs an earlier install that left it private.
chmod 0644 "$dest/etc/host-agent/config.json"
if [ -z "$dest" ] || [ -n "${SYSTEMCTL:-}" ]; then
  systemctl=${SYSTEMCTL:-systemctl}
  $systemctl daemon-reload
  $systemctl enable host-agent.service
  if grep -q '^HOST_AGENT_TOKEN=..*' "$dest/etc/host-agent/env"; then
    # An upgrade: the new bundle and unit take effect now.
    $systemctl restart host-agent.service
    echo "install-agent: host-agent.service enabled and (re)started (journalctl -u host-agent to follow it)"
  else
    # Started without a token it would only exit and be restarted every 5 s.
    echo "install-agent: host-agent.service enabled, not started: set HOST_AGENT_URL and HOST_AGENT_TOKEN in /etc/host-agent/env, then: systemctl start host-agent"
  fi
else
  echo "install-agent: installed under $dest"
fi
