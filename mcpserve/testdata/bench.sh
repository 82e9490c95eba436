#!/usr/bin/env bash
# bench.sh: the tools/call round trip of berm serve's echo over stdio and
# streamable HTTP, side by side with the reference MCP server from npm
# (server-everything's echo), and the start-up of berm serve --stdio with 20
# programs deployed to its first tools/list. Extra arguments go to mcpbench
# (-n, -warmup, -rounds, -starts, -cold=false, -berm-env GOGC=400, -stdio-only,
# -interleave, -compare label=/path/to/berm). It exits 1 when a target of
# issue 3 is missed, after printing every figure.
#
#   bash mcpserve/testdata/bench.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
export CGO_ENABLED=0

npm=mcpserve/testdata/npm
if [ ! -x "$npm/node_modules/.bin/mcp-server-everything" ]; then
	echo "install the npm packages of $npm" >&2
	npm ci --prefix "$npm" --no-audit --no-fund >&2
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
go build -o "$work/berm" .
go build -o "$work/mcpbench" ./mcpserve/testdata/mcpbench

BERM_ROOT="$work/root" "$work/berm" deploy echo testdata/echo.wasm >/dev/null
for i in $(seq -w 1 20); do
	BERM_ROOT="$work/root20" "$work/berm" deploy "echo$i" testdata/echo.wasm >/dev/null
done

"$work/mcpbench" -berm "$work/berm" -root "$work/root" -root20 "$work/root20" \
	-everything "$npm/node_modules/.bin/mcp-server-everything" "$@"
