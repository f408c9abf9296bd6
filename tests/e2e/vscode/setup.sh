#!/usr/bin/env bash
# Install what the real-VS-Code e2e test needs: Debian chromium and libkrb5-dev, Node 24 (from
# the npm package node@24), code-server 4.139.1 and playwright-core, the packaged extension, and
# llama.vscode 0.0.63 built unchanged from its source in ../shared/clients (llama-vscode.vsix).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
if ! [ -x /usr/bin/chromium ] || ! dpkg -s libkrb5-dev >/dev/null 2>&1; then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium libkrb5-dev >/dev/null
fi
(cd "$here/node24" && npm ci --no-audit --no-fund --loglevel=error)
export PATH="$here/node24/node_modules/node/bin:$PATH"
(cd "$here" && npm ci --no-audit --no-fund --loglevel=error)
(cd "$here/../../../vscode-extension" && npm ci --no-audit --no-fund --loglevel=error && npm run -s package >/dev/null)
# llama.vscode, unchanged: its own npm ci (which builds its webview UI) and esbuild bundle, packaged by vsce
clients="$here/../../../../shared/clients"
if [ -f "$clients/llama.vscode-0.0.63.tar.gz" ]; then
  rm -rf "$here/build/llama.vscode" && mkdir -p "$here/build"
  tar xzf "$clients/llama.vscode-0.0.63.tar.gz" -C "$here/build"
  (cd "$here/build/llama.vscode" && npm ci --no-audit --no-fund --loglevel=error >/dev/null && npm run -s bundle >/dev/null 2>&1 \
    && "$here/../../../vscode-extension/node_modules/.bin/vsce" package --no-dependencies --allow-missing-repository \
       -o "$here/build/llama-vscode.vsix" </dev/null >/dev/null)
fi
echo "e2e toolchain ready: node $(node --version), code-server $("$here/node_modules/.bin/code-server" --version | head -1)"
